"""Every ``--help`` has a runnable example whose files exist (issue 14).

The examples are read from each command's help (a leaf command's own help shows one that runs it:
its epilog, or the lines of its group's list that run it, ``cli.base.ExampleCommand``),
run from a directory laid out like the checkout (``recipes/``, ``runners/``, ``patches/``) after
``bisectbot demo`` -- the state the examples assume -- and every file an example names must
exist there (or be written by an earlier example of the same help, ``> FILE``). The offline
examples are then run as printed.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from bisectbot.cli import cli

ROOT = Path(__file__).resolve().parents[2]
GLOBAL_OPTS_WITH_VALUE = {"--state"}
OUTPUT_OPTS = {"--out", "--log-dir"}
NOT_FILE_OPTS = {"--repository", "--model", "--pattern", "--ids", "--base", "--overlay", "--issue", "--comment",
                 "--good", "--bad", "--registry", "--hub-api", "--endpoint", "--repo"}
RUN_AS_PRINTED = ("bisectbot recipe validate", "bisectbot recipe schema", "bisectbot patches list",
                  "bisectbot report render", "bisectbot --state bisectbot-demo-out/work/state bisect",
                  "bisectbot probe --recipe demo-command", "bisectbot runner check --profile cpu",
                  "bisectbot report file", "bisectbot recipe list", "bisectbot recipe init")


def commands(cmd: click.Command = cli, path: tuple[str, ...] = ()):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from commands(sub, (*path, name))


def help_text(path: tuple[str, ...]) -> str:
    cmd: click.Command = cli
    ctx = click.Context(cli, info_name="bisectbot")
    for name in path:
        assert isinstance(cmd, click.Group)
        cmd = cmd.commands[name]
        ctx = click.Context(cmd, info_name=name, parent=ctx)
    return cmd.get_help(ctx)


def examples(text: str) -> list[str]:
    """Example command lines: lines holding ``bisectbot ...`` (continuations joined, comments cut)."""
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if cur:
            cur += " " + line
        elif re.search(r"(^|&& )bisectbot ", line) or line.startswith(("GITHUB_TOKEN=", "python -m bisectbot")):
            cur = line
        else:
            continue
        if cur.endswith("\\"):
            cur = cur[:-1].rstrip()
            continue
        out.append(cur)
        cur = ""
    return out


def words(example: str) -> list[list[str]]:
    """Each ``bisectbot`` invocation of an example line as argv (``&&`` splits, ``#`` comments cut)."""
    code = re.sub(r"\s#.*$", "", example)
    out = []
    for part in code.split("&&"):
        argv = shlex.split(part.replace("&", " "))
        while argv and "=" in argv[0] and not argv[0].startswith("-"):
            argv = argv[1:]  # VAR=value prefix
        if argv and argv[0] == "bisectbot":
            out.append(argv)
    return out


def command_path(argv: list[str]) -> tuple[str, ...]:
    i, path, cmd = 1, [], cli
    while i < len(argv):
        a = argv[i]
        if a in GLOBAL_OPTS_WITH_VALUE:
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        if isinstance(cmd, click.Group) and a in cmd.commands:
            cmd = cmd.commands[a]
            path.append(a)
            i += 1
            continue
        break
    return tuple(path)


def named_files(argv: list[str]) -> tuple[list[str], list[str]]:
    """(files the invocation reads, files it writes with ``>``)."""
    reads, writes = [], []
    skip_next = False
    for i, a in enumerate(argv[1:], 1):
        if skip_next:
            skip_next = False
            continue
        if a == ">":
            if i + 1 < len(argv):
                writes.append(argv[i + 1])
            skip_next = True
            continue
        if a in OUTPUT_OPTS or a in NOT_FILE_OPTS:
            skip_next = True
            continue
        if a.startswith(("-", "/", "~", "$")) or any(x in a for x in ("://", "@", "...", "=", ":")):
            continue
        if "/" in a or re.search(r"\.(ya?ml|json|log|txt|md)$", a):
            reads.append(a)
    return reads, writes


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("examples")
    for name in ("recipes", "runners", "patches"):
        (d / name).symlink_to(ROOT / name)
    env = {k: v for k, v in os.environ.items() if k not in ("BISECTBOT_STATE", "GITHUB_TOKEN", "GH_TOKEN",
                                                            "BISECTBOT_GITHUB_TOKEN")}
    r = subprocess.run([sys.executable, "-m", "bisectbot", "demo"], cwd=d, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return d


def test_every_help_has_an_example_whose_files_exist(workdir):
    all_examples: dict[tuple[str, ...], list[str]] = {}
    problems = []
    for path, _cmd in commands():
        text = help_text(path)
        exs = examples(text)
        all_examples[path] = exs
        written: set[str] = set()
        for ex in exs:
            for argv in words(ex):
                reads, writes = named_files(argv)
                for f in reads:
                    hits = glob.glob(str(workdir / f)) if "*" in f else [str(workdir / f)] if (workdir / f).exists() else []
                    if not hits and f not in written:
                        problems.append(f"bisectbot {' '.join(path)} --help: example names {f!r}, which does not "
                                        f"exist: {ex}")
                written.update(writes)
    leaves = {path for path, cmd in commands() if not isinstance(cmd, click.Group)}
    for path in all_examples:
        own = [p for ex in all_examples[path] for p in map(command_path, words(ex))]
        inherited = [p for k in range(len(path)) for ex in all_examples[path[:k]] for p in map(command_path, words(ex))]
        # issue 41, item 11: a leaf's own --help shows an example that runs it (16 of 30 relied on
        # their group's list, which `bisectbot X Y --help` does not print)
        if not any(p[:len(path)] == path for p in (own if path in leaves else own + inherited)):
            problems.append(f"bisectbot {' '.join(path)} --help: no example runs this command")
    assert not problems, "\n".join(problems)


def test_offline_examples_run_as_printed(workdir):
    env = {k: v for k, v in os.environ.items() if k not in ("BISECTBOT_STATE", "GITHUB_TOKEN", "GH_TOKEN",
                                                            "BISECTBOT_GITHUB_TOKEN")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    seen: set[str] = set()
    ran = []
    for path, _cmd in commands():
        for ex in examples(help_text(path)):
            if ex in seen or not ex.startswith(RUN_AS_PRINTED) or "--pypi" in ex or "--image" in ex:
                continue
            seen.add(ex)
            line = re.sub(r"\s#.*$", "", ex)
            r = subprocess.run(["bash", "-c", line], cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
            ok = {0, 1} if "runner check" in ex else {0}  # runner check: a failed host check is exit 1
            assert r.returncode in ok, f"{ex}\nexit {r.returncode}\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}"
            ran.append(ex)
    print("\n".join(ran))
    assert len(ran) >= 6, ran


def test_every_option_of_every_command_says_what_it_is() -> None:
    """New-user pass (issue 41): ``bisect replay --help`` listed --good, --bad, --out and --runner
    with no word. Kind: *an option shown without its meaning*; every option of every command (the
    help flag aside) carries a help text."""
    bare = [f"bisectbot {' '.join(path)} {'/'.join(p.opts)}" for path, cmd in commands()
            for p in cmd.params if isinstance(p, click.Option) and not p.help and p.name != "help"]
    assert not bare, bare
