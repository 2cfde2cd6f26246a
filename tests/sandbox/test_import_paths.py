"""Issue 40, the re-check of the hostile pass: what a named virtualenv imports from outside itself (its
``.pth`` lines, an editable install's ``MAPPING``, :func:`bisectbot.sandbox._import_paths`) is shown only as
any named path is (:func:`bisectbot.sandbox._showable`).

Kind: *a path shown in the sandbox because something trusted names it*. Members: a symlink and a ``..``
spelling that lead below a hidden directory (the state directory, a credential file: judged by where they
lead, as the bind is), a private directory itself (``/tmp``, ``/run``: the host's whole directory), a
``.pth`` that is a FIFO (no hang), a MAPPING value with a NUL byte or a symlink loop (no crash). The
probed path is passed with a prefix so that it is not itself a named argument."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from bisectbot import sandbox

PY = sys.executable


def _venv(root: Path) -> tuple[Path, Path]:
    venv = root / "venv"
    subprocess.run([PY, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    return venv, next(venv.glob("lib/python3*/site-packages"))


def _seen(venv: Path, tree: Path, *paths: Path | str) -> dict[str, bool]:
    """Which of ``paths`` the sandboxed interpreter of ``venv`` sees."""
    code = "import os,sys\nfor p in sys.argv[1:]: p = p[1:]; print(int(os.path.exists(p)), p)"
    argv, env = sandbox.wrap([str(venv / "bin" / "python"), "-c", code, *("x" + str(q) for q in paths)], tree=tree,
                             env={"PATH": "/usr/bin:/bin"})
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return {ln.split(" ", 1)[1]: ln.startswith("1") for ln in p.stdout.splitlines()}


@pytest.fixture()
def base(monkeypatch):
    # not below /tmp: a home below /tmp makes "/tmp" a directory that holds the veiled home
    b = Path(tempfile.mkdtemp(prefix="rc40-attack-", dir="/var/tmp"))
    (b / "home").mkdir()
    (b / "tree").mkdir()
    monkeypatch.setenv("HOME", str(b / "home"))
    monkeypatch.delenv("BISECTBOT_SANDBOX", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(sandbox, "_hidden", set(sandbox._hidden))
    yield b
    subprocess.run(["rm", "-rf", str(b)])


def test_a_symlinked_pth_dir_does_not_show_what_lies_below_the_hidden_state_dir(base: Path) -> None:
    """A .pth line naming a symlink whose target is below a hidden directory (the bot's --state dir)."""
    state = base / "state"
    (state / "sub").mkdir(parents=True)
    (state / "sub" / "ledger.sqlite").write_text("LEDGER")
    sandbox.protect(state, "hide")
    venv, site = _venv(base)
    (base / "src").symlink_to(state / "sub")
    (site / "src.pth").write_text(f"{base / 'src'}\n")
    assert _seen(venv, base / "tree", state / "sub" / "ledger.sqlite") == {str(state / "sub" / "ledger.sqlite"): False}


def test_a_mapping_value_with_dotdot_does_not_show_a_hidden_credential_file(base: Path) -> None:
    """An editable finder MAPPING value spelt with '..' that resolves below ~/.config/gh (hidden)."""
    home = base / "home"
    (home / ".config" / "gh").mkdir(parents=True)
    (home / ".config" / "gh" / "hosts.yml").write_text("oauth_token: gho_SECRET\n")
    (home / ".cache").mkdir()
    venv, site = _venv(base)
    (site / "__editable___x_0_1_finder.py").write_text(
        f"MAPPING: dict[str, str] = {{'x': {str(home / '.cache' / '..' / '.config' / 'gh' / 'hosts.yml')!r}}}\n")
    got = _seen(venv, base / "tree", home / ".config" / "gh" / "hosts.yml")
    assert got == {str(home / ".config" / "gh" / "hosts.yml"): False}


@pytest.mark.parametrize("line", ["/tmp", "/run"])
def test_a_pth_line_naming_a_private_dir_itself_does_not_show_the_hosts_whole_dir(base: Path, line: str) -> None:
    """The next member after '/' and a dir holding the home: the private dirs themselves (/tmp, /run), which
    the sandbox empties on purpose (host /run holds containerd's socket, /run/user/UID/bus, ...)."""
    venv, site = _venv(base)
    (site / "odd.pth").write_text(f"{line}\n")
    probe = Path(tempfile.mkdtemp(prefix="bisectbot-secret-", dir=line))  # the host's own entry there
    try:
        assert _seen(venv, base / "tree", probe) == {str(probe): False}
    finally:
        probe.rmdir()


def test_a_pth_that_is_a_fifo_does_not_hang_the_bot(base: Path) -> None:
    venv, site = _venv(base)
    os.mkfifo(site / "stuck.pth")
    try:
        subprocess.run([PY, "-c", f"from bisectbot import sandbox; from pathlib import Path; "
                                  f"print(sandbox._import_paths(Path({str(venv)!r})))"],
                       capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("_import_paths blocked on a .pth that is a FIFO (the bot hangs before any candidate starts)")


@pytest.mark.parametrize("value", ["nul", "loop"])
def test_an_odd_mapping_value_is_skipped_not_a_crash(base: Path, value: str) -> None:
    venv, site = _venv(base)
    if value == "loop":
        (base / "l").symlink_to(base / "l")
        v = str(base / "l" / "pkg")
    else:
        v = "/var/tmp/a\x00b"
    (site / "__editable___x_0_1_finder.py").write_text(f"MAPPING = {{'x': {v!r}}}\n")
    assert isinstance(sandbox._import_paths(venv), set)
