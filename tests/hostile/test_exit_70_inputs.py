"""Issue 41, item 12: hostile inputs that ended in exit 70 (an internal error) are bad input.

Kind 1: JSON nested deeper than the parser's recursion (100,000 brackets) in any file or reply the bot
reads reaches a ``json.loads`` whose caller catches ``ValueError`` only. Members vary the reader (a
round's verdict file, ``result.json``, the parser itself), the bracket (``[``, ``{"a":``) and the depth
(just over :data:`bisectbot.jsonio.MAX_DEPTH`, 5,000, 100,000).

Kind 2: an output path that is no place for a new regular file (``round probe --out``): members vary
what is there (a character device, /proc, /sys, a directory, a symlink)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bisectbot import jsonio


@pytest.mark.parametrize("depth", [jsonio.MAX_DEPTH + 1, 5_000, 100_000])
@pytest.mark.parametrize("kind", ["list", "object"])
def test_the_parser_refuses_deep_nesting_as_value_error(kind: str, depth: int) -> None:
    doc = "[" * depth + "]" * depth if kind == "list" else '{"a":' * depth + "1" + "}" * depth
    with pytest.raises(ValueError, match="nested deeper"):
        jsonio.loads(doc)
    with pytest.raises(ValueError, match="nested deeper"):
        jsonio.loads(doc.encode())


def test_what_the_bot_writes_is_well_inside_the_limit() -> None:
    ok = "[" * jsonio.MAX_DEPTH + "]" * jsonio.MAX_DEPTH
    assert jsonio.loads(ok) is not None
    assert jsonio.loads('{"a": [1, {"b": null}], "c": "x"}') == {"a": [1, {"b": None}], "c": "x"}
    with pytest.raises(ValueError):
        jsonio.loads("{not json")


def test_a_report_file_nested_too_deep_is_bad_input(tmp_path) -> None:
    from bisectbot.errors import BadInput
    from bisectbot.report.load import load_result

    f = tmp_path / "result.json"
    f.write_text('{"recipe": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(BadInput):
        load_result(f)


def test_a_verdict_file_nested_too_deep_is_refused_alone(tmp_path) -> None:
    """``round import`` refuses such a file by itself (ImportOutcome "refused") and goes on with the
    others: :func:`read_verdict` raises BadInput for it, nothing else."""
    from bisectbot.errors import BadInput
    from bisectbot.session.rounds.plan import read_verdict

    f = tmp_path / "v.json"
    f.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(BadInput, match="not a JSON verdict file"):
        read_verdict(f)


@pytest.mark.parametrize("target", ["/proc/v.json", "/sys/v.json", "/dev/null", "dir", "link"])
def test_round_probe_refuses_an_out_it_cannot_write_before_probing(tmp_path, target) -> None:
    """Issue 41, items 12 and 13 (the kind: an output path that is no place for a new regular file):
    ``round probe --out`` onto a character device, into /proc or /sys (no file can be created there,
    root included), onto a directory or a symlink is exit 2 naming the option, before any probe runs,
    and the thing at the path is left as it was."""
    import os
    import stat
    import subprocess
    import sys

    from tests.installed.test_launch_and_recipes import env

    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: out\nsource: {kind: git, repo: /nonexistent}\nreproducer: {kind: command, command: "
                      "[sh, -c, 'exit 0']}\nregress: command\n")
    if target == "dir":
        out = tmp_path / "d"
        out.mkdir()
    elif target == "link":
        out = tmp_path / "l.json"
        out.symlink_to("/dev/null")
    else:
        out = Path(target)
    before = os.lstat(out).st_mode if os.path.lexists(out) else None
    p = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp_path / "st"), "round", "probe",
                        str(recipe), "--session", "s", "--ref", "HEAD", "--out", str(out)],
                       capture_output=True, text=True, env=env(), timeout=120, cwd=tmp_path)
    assert p.returncode == 2 and "--out" in p.stderr and str(out.name) in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr
    if before is not None:
        assert os.lstat(out).st_mode == before
    if target == "/dev/null":
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
