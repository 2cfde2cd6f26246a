"""Issue 25, input 2: model output, server messages, commit subjects and file names cannot drive
the terminal, and a crash is never exit 1 (``probe``'s "garbage found").

Each test runs the installed ``bisectbot`` in its own process against real parts: the reference
engine (``bisectbot.demo.engine``) serving replies and a model id made of Rich markup, ANSI/OSC
escapes, carriage returns and bidi controls; a real git history whose subjects carry the same.
What reaches stdout and stderr must hold none of those characters raw, and must show them as
visible, inert text (``\\x1b[2J``, ``\\x0d``, ``\\u202e``, ``[link=…]`` printed as written).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

# What a hostile reply starts with (SizeResult.excerpt keeps a reply's first 120 characters): a
# stray Rich closing tag (MarkupError before the fix), a Rich link, clear-screen and cursor-home,
# an OSC window title ended by BEL, a carriage return that would overwrite the line with a forged
# verdict, a right-to-left override (Trojan Source), a C1 CSI and backspaces.
HOSTILE_HEAD = ("4 [/b][link=https://evil.example/x]click[/link]\x1b[2J\x1b[H\x1b]0;owned\x07"
                "\rculprit: c0ffee \u202egnp.exe\u202c\x9b31m\x08\x08")
# The engine answers this below its threshold; the classifier calls it OK (the expected answer 4
# is there and the control characters are under 2 % of the reply), so its excerpt is printed.
HOSTILE_ANSWER = HOSTILE_HEAD + " ok. " + "The document is a long list of functions; nothing in it changes this. " * 12
HOSTILE_MODEL = "[blink]m[/blink]\x1b[31m\r\u202e"

# raw characters that act on a terminal: ESC, BEL, BS, CR, C1 CSI, bidi overrides/isolates, LRM/RLM
ACTIVE = re.compile("[\x1b\x07\x08\r\x9b\u202a-\u202e\u2066-\u2069\u200e\u200f]")


def exe() -> str:
    cand = Path(sys.executable).parent / "bisectbot"
    return str(cand) if cand.exists() else shutil.which("bisectbot") or "bisectbot"


def bb(*args: str, cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FORCE_COLOR", "NO_COLOR")}
    return subprocess.run([exe(), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          errors="surrogateescape")


def assert_inert(out: str) -> None:
    bad = sorted({f"U+{ord(m.group(0)):04X}" for m in ACTIVE.finditer(out)})
    assert not bad, f"raw terminal controls reached the output: {bad}\n{out[-3000:]}"
    assert "Traceback" not in out and "MarkupError" not in out, out[-3000:]


def test_probe_prints_model_output_made_of_markup_and_escapes_inert(engine_factory, tmp_path) -> None:
    """The failing input: the first example of ``probe --help`` against the reference engine crashed
    with ``rich.errors.MarkupError: closing tag '[/INST]' …``, exit 1 (read as "garbage found").
    Here the engine leaks ``[/INST]``-style template tokens above its threshold and answers with
    markup, escapes, CR and bidi below it; the model id is hostile too."""
    eng = engine_factory(threshold=20000, answer=HOSTILE_ANSWER, model=HOSTILE_MODEL,
                         garbage_kinds=["template-leak"])
    p = bb("probe", "--endpoint", f"http://127.0.0.1:{eng.port}", "--min-size", "2000", "--max-size", "120000",
           cwd=tmp_path)
    out = p.stdout + p.stderr
    assert p.returncode == 1, out[-3000:]  # the verdict: garbage found, nothing crashed
    assert_inert(out)
    assert re.search(r"GARBAGE from \d+ prompt tokens: threshold in \[19\d\d\d, 20\d\d\d\]", p.stdout), p.stdout
    flat = re.sub(r"\s+", "", p.stdout)  # Rich wraps table cells and long lines
    # every hostile piece is shown as what it is
    for shown in ("[/b][link=https://evil.example/x]click[/link]", "\\x1b[2J\\x1b[H\\x1b]0;owned\\x07",
                  # (the reproducer's excerpt turns the reply's CR into a space; the model id keeps its CR)
                  "culprit:c0ffee\\u202egnp.exe\\u202c\\x9b31m\\x08\\x08", "[blink]m[/blink]\\x1b[31m\\x0d\\u202e"):
        assert shown in flat, (shown, p.stdout)
    # the garbage itself is printed next to the last healthy reply
    garbage = next(ln for ln in p.stdout.splitlines() if ln.startswith("reply at the first GARBAGE size"))
    assert "prompt tokens" in garbage
    assert "reply at the last OK size" in p.stdout
    # the progress lines on stderr quote the classifier's reasons (template tokens) inert as well
    assert re.search(r"chat-template token\(s\), e\.g\. '(\[/INST\]|<)", p.stderr), p.stderr

    # --json: one document, the reply kept as data (JSON-escaped), nothing raw on the terminal
    p = bb("--json", "probe", "--endpoint", f"http://127.0.0.1:{eng.port}", "--min-size", "2000",
           "--max-size", "120000", cwd=tmp_path)
    assert p.returncode == 1, p.stderr[-3000:]
    assert_inert(p.stdout + p.stderr)
    doc = json.loads(p.stdout)
    assert doc["model"] == HOSTILE_MODEL
    assert any(HOSTILE_HEAD[:40] in row["excerpt"] for row in doc["table"]), doc["table"]


def test_a_crash_is_exit_70_never_1(tmp_path) -> None:
    """An unexpected exception (a bug) exits 70 with its traceback on stderr, with and without
    ``--json``; exit 1 stays "garbage found" for ``probe``. The command that raises is registered on
    the real CLI group and run through the real ``bisectbot.cli.main``; its message is hostile."""
    driver = tmp_path / "crash.py"
    driver.write_text(
        "import sys\n"
        "from bisectbot.cli import cli, main\n"
        "@cli.command('explode')\n"
        "def explode():\n"
        "    raise RuntimeError('boom \\x1b]0;title\\x07 [/INST] \\r\\u202e')\n"
        "main(sys.argv[1:])\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for args in (["explode"], ["--json", "explode"]):
        p = subprocess.run([sys.executable, str(driver), *args], capture_output=True, text=True, env=env,
                           timeout=60, cwd=tmp_path)
        assert p.returncode == 70, (args, p.returncode, p.stderr[-2000:])
        assert "RuntimeError" in p.stderr and "internal error (a bug, exit 70)" in p.stderr, p.stderr
        assert not ACTIVE.search(p.stdout + p.stderr), (p.stdout + p.stderr)[-2000:]
        if args[0] == "--json":
            doc = json.loads(p.stdout)
            assert doc["exit_code"] == 70 and doc["error"]["kind"] == "internal", doc


def test_file_names_in_error_messages_are_inert(tmp_path) -> None:
    """The next member of the kind: a recipe whose *file name* carries escapes, CR and bidi; the
    located error line names the file, and the name is printed visibly, not executed."""
    name = "r\x1b[2J\x1b]0;t\x07\r\u202eevil.yaml"
    bad = tmp_path / name
    bad.write_text("name: x\nreproducer: {kind: command, command: 12}\n")
    p = bb("recipe", "validate", str(bad), cwd=tmp_path)
    out = p.stdout + p.stderr
    assert p.returncode == 2, out
    assert_inert(out)
    assert "r\\x1b[2J\\x1b]0;t\\x07\\x0d\\u202eevil.yaml" in out, out


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Mallory \u202e\x1b[31m", "GIT_AUTHOR_EMAIL": "m@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def test_commit_subjects_in_run_progress_and_result_lines_are_inert(tmp_path) -> None:
    """Commit subjects reach the progress lines of ``bisectbot run`` (and the culprit line):
    a subject with CR, bidi controls, an OSC title and an SGR colour is printed inert."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(10):
        (repo / "bug").write_text("1\n" if i >= 6 else "0\n")
        (repo / "n").write_text(f"{i}\n")
        _git(repo, "add", "-A")
        subject = f"c{i}: fix\rculprit: someone-else \u202egnp.exe\u202c \x1b]0;pwn\x07\x1b[31mred [bold]x[/]"
        _git(repo, "commit", "-q", "-m", subject)
        shas.append(_git(repo, "rev-parse", "HEAD"))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "hostile-subjects",
        "source": {"kind": "git", "repo": str(repo), "component": "app"},
        "reproducer": {"kind": "command", "command": ["sh", "-c", "test $(cat bug) = 0"], "command_timeout_s": 30},
        "bisect": {"good": shas[0], "bad": shas[-1]},
        "report": {"dir": str(tmp_path / "out")},
    }, sort_keys=False))
    p = bb("--state", str(tmp_path / "state"), "-v", "run", str(recipe), cwd=tmp_path)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    assert_inert(out)
    assert shas[6] in p.stdout, p.stdout  # the culprit line names the right commit
    assert "\\x0dculprit: someone-else \\u202egnp.exe\\u202c \\x1b]0;pwn\\x07\\x1b[31mred" in out, out[-3000:]


def test_the_stream_guard_keeps_colours_only_on_a_terminal() -> None:
    """The safety net under every print (RedactingStream -> terminal.guard): Rich's SGR colours
    survive on a terminal; cursor movement, titles, links, CR and bidi never do."""
    from bisectbot.terminal import guard, inert

    s = "\x1b[1;31mGARBAGE\x1b[0m \x1b[2J\x1b]8;;https://x\x1b\\l\x1b]8;;\x1b\\ a\rb \u202e"
    assert guard(s, keep_sgr=True) == ("\x1b[1;31mGARBAGE\x1b[0m \\x1b[2J\\x1b]8;;https://x\\x1b\\l"
                                       "\\x1b]8;;\\x1b\\ a\\x0db \\u202e")
    assert "\x1b" not in guard(s)
    assert guard("plain\ttext\n") == "plain\ttext\n"
    assert inert("a\nb\tc") == "a\\x0ab\\x09c" and inert("a\nb", multiline=True) == "a\nb"
