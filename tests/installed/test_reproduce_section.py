"""Issue 25, input 3: the issue's Reproduce section works for someone without the bot and without
its state, the way syzbot's C reproducer does.

``bisectbot demo`` files its would-be issue; the test then reads ``issue.md`` as a maintainer
would and, in a clean directory with an empty home (no ledger, no bisectbot state, no recipe):
saves ``request.json`` as printed, checks that ``make_request.py`` (run by an isolated
``python3 -I``) prints the same bytes, runs the printed server steps (clone, checkout of the full
SHA, build, serve) for the first bad and for the last good, sends the printed ``curl`` line and
gets the reply the issue says it will see: the garbage from the first bad, the healthy reply from
the last good. The bisectbot line names full SHAs, the recipe by file name (its text beside it),
no ``--state``, no elided (``…/``) or ``site-packages`` path and no symbolic ref.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from bisectbot.reproduce.search import excerpt
from bisectbot.sanitize import sanitize

pytestmark = pytest.mark.slow


def blocks(section: str) -> list[tuple[str, str]]:
    """``(language, text)`` of every fenced code block, in order."""
    return [(m.group(2), m.group(3)) for m in re.finditer(r"^(`{3,})(\w*)\n(.*?)\n\1$", section, re.S | re.M)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_and_ask(server: str, send: str, cwd: Path, env: dict[str, str]) -> str:
    """Run the printed server steps in ``cwd`` (a fresh clone each time), wait for ``/health``, run
    the printed ``curl`` line and return what it printed (the reply's content)."""
    port = free_port()
    env = {**env, "PORT": str(port)}
    log = (cwd / "server.log").open("wb")
    proc = subprocess.Popen(["bash", "-ec", server], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (cwd / "server.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):  # noqa: S310
                    break
            except OSError:
                assert time.monotonic() < deadline, (cwd / "server.log").read_text()[-3000:]
                time.sleep(0.2)
        r = subprocess.run(["bash", "-ec", send], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout.rstrip("\n")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


def test_the_issue_reproduce_section_runs_without_bisectbot_and_reproduces_the_verdict(tmp_path) -> None:
    env0 = {k: v for k, v in os.environ.items() if not k.startswith(("BISECTBOT_", "GITHUB_", "GH_"))}
    r = subprocess.run([sys.executable, "-m", "bisectbot", "demo", "--out", "out"], cwd=tmp_path, env=env0,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    issue = (tmp_path / "out" / "issue.md").read_text()
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    final = result["stages"][-1]
    fb, lg = final["first_bad"]["ref"], final["last_good"]["ref"]
    m = re.search(r"^### Reproduce\n(.*?)(?=^### |<sub>bisectbot)", issue, re.S | re.M)
    assert m, issue[:3000]
    section = m.group(1)

    # pasteable: no elided or site-packages path, no symbolic ref, no state
    assert "…/" not in section and "site-packages" not in section and "HEAD~" not in section, section[:3000]
    code = blocks(section)
    langs = [lang for lang, _ in code]
    assert langs == ["sh", "sh", "json", "python", "sh", "yaml"], langs
    server, send, request, make_request, bot, recipe = (text for _, text in code)
    assert f"git checkout --detach {fb}" in server
    assert re.search(rf"check out {lg} ", section), section  # how to get the last good's reply
    argv = bot.split()
    assert argv[:3] == ["bisectbot", "run", "demo-engine-prefill.yaml"] and "--state" not in argv, bot
    assert argv[argv.index("--good") + 1] == lg and argv[argv.index("--bad") + 1] == fb, bot
    assert "name: demo-engine-prefill" in recipe  # the recipe to save beside the command
    # the demo's server is the bot's own engine: the lines need a python3 that has bisectbot (issue 41
    # item 9), which is how they are run below (PATH starts with the bot's interpreter)
    assert "ships with bisectbot" in section and "python3 that has bisectbot installed" in section, section[:2000]

    # a clean directory, an empty home: nothing of bisectbot's state can be found
    clean = tmp_path / "clean"
    home = tmp_path / "empty-home"
    clean.mkdir()
    home.mkdir()
    env = {**env0, "HOME": str(home), "XDG_STATE_HOME": str(home / ".local" / "state"),
           "PATH": os.path.dirname(sys.executable) + os.pathsep + env0.get("PATH", "")}
    (clean / "request.json").write_text(request + "\n")
    (clean / "make_request.py").write_text(make_request + "\n")
    made = subprocess.run(["python3", "-I", "make_request.py"], cwd=clean, env=env, capture_output=True, text=True,
                          timeout=60)
    assert made.returncode == 0, made.stderr
    assert made.stdout == request + "\n"  # the generator (standard library only) gives the same request
    body = json.loads(request)
    assert body["temperature"] == 0.0 and body["seed"] == 0 and body["max_tokens"] == 200

    expected = re.search(r"Expected \(last good, [^)]*\): (.*)", section).group(1).strip()  # type: ignore[union-attr]
    seen_line = re.search(r"Seen \(first bad, [^)]*\): (.*)", section).group(1)  # type: ignore[union-attr]
    seen = seen_line.split(" — ")[0].strip()

    for sha, want, what in ((fb, seen, "first bad"), (lg, expected, "last good")):
        work = clean / what.replace(" ", "-")
        work.mkdir()
        (work / "request.json").write_text(request + "\n")
        steps = server.replace(f"git checkout --detach {fb}", f"git checkout --detach {sha}")
        reply = serve_and_ask(steps, send, work, env)
        # the reply the issue says the reader will see, to the character (the engine is deterministic)
        # an empty reply is printed "(empty reply)" (the first bad's reply at the bad end's failing
        # size, asked first since issue 23, is empty in the demo)
        shown = sanitize(excerpt(reply), 400, refs=True) if reply.strip() else "(empty reply)"
        assert shown == want, (what, reply[:300], want)
    assert seen != expected  # the verdict: garbage on the first bad, the healthy answer on the last good
    assert " — " in seen_line and seen_line.split(" — ", 1)[1].strip()  # and why it is garbage
