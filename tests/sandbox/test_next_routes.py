"""Issue 36, the hostile pass's next members of each kind, through the installed ``bisectbot run``.

Each candidate (``check.py`` of a 6-commit history, bad from c3) tries one route the first set of
tests (test_routes.py) did not, and writes what it found into ``$LOOT`` (a writable path of the
sandbox). The kinds and the boundary that closes each:

* **the bot deletes through a link its candidate planted**: the worktree swapped for a symlink to
  ``~/.cache`` with a ``.git`` file pointing back; ``git worktree remove --force`` emptied the target.
  Boundary: the bot deletes candidate trees itself, never through a link (run/local.py ``release``).
* **a host directory the candidate may write that is not its own**: the host's ``/dev`` (a root
  candidate created files there). Boundary: the sandbox's own ``/dev`` with only GPU nodes bound.
* **a daemon socket of the host**, at any path (Docker's own containerd under ``/run/docker``).
  Boundary: an empty ``/run``.
* **a credential store at a path the bot's environment chose** (``GH_CONFIG_DIR``, ``DOCKER_CONFIG``,
  ``AWS_SHARED_CREDENTIALS_FILE``, ``GIT_CONFIG_GLOBAL``, ``NETRC``, ``XDG_CONFIG_HOME``) and **any
  credential file in ``$HOME``** whatever its tool (``~/.npmrc``, ``~/.config/pip/pip.conf``,
  ``~/.cargo/credentials.toml``, ``~/.config/containers/auth.json``). Boundary: ``$HOME`` veiled
  (a fresh tmpfs showing only what is bound below it) and the relocating variables' targets hidden.
* **a secret in a variable's innocuous part**: a token as the user part of ``HTTPS_PROXY``.
* **a file a later, unsandboxed step executes**: a cached pip wheel rewritten. Boundary: the user's
  cache read-only but for the candidates' own caches (weights, kernel caches).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.bisect.conftest import git, run_cli

pytestmark = [pytest.mark.slow]

SECRET = "s3cr3tT0kenValue9876"


def _history(repo: Path, check: str) -> list[str]:
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "check.py").write_text(check)
    shas = []
    for i in range(6):
        (repo / "state.txt").write_text(("bad" if i >= 3 else "good") + f" {i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"c{i}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return shas


def _recipe(tmp: Path, shas: list[str], name: str, command: list[str] | None = None) -> Path:
    """``tmp/r.yaml``: the command reproducer ``command`` (default: this interpreter on check.py) over
    ``tmp/repo``'s history ``shas``, ``$LOOT`` passed through, the report in ``tmp/out``."""
    recipe = tmp / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": name, "source": {"kind": "git", "repo": str(tmp / "repo")}, "regress": "command",
        "reproducer": {"kind": "command", "command": command or [sys.executable, "check.py"], "command_timeout_s": 60},
        "env_passthrough": ["LOOT"], "bisect": {"good": shas[0], "bad": shas[-1]},
        "report": {"dir": str(tmp / "out")}}, sort_keys=False))
    return recipe


def _night(tmp: Path, check: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, Path]:
    """One ``bisectbot run`` of the hostile history as the bot would run it, with ``env`` added to
    the bot's environment; returns the run and ``$LOOT``."""
    shas = _history(tmp / "repo", check)
    loot = tmp / "loot"
    loot.mkdir()
    recipe = _recipe(tmp, shas, "hostile-next")
    p = run_cli("--state", str(tmp / "state"), "run", str(recipe),
                env={"LOOT": str(loot), "BISECTBOT_SANDBOX_WRITABLE": str(loot), "GITHUB_TOKEN": "ghp_" + SECRET,
                     **env})
    assert p.returncode == 0 and shas[3] in p.stdout, p.stdout[-2000:] + p.stderr[-3000:]
    return p, loot


SWAP = """\
import os, sys
bad = open("state.txt").read().startswith("bad")
wt = os.getcwd()
target = os.environ["LOOT"] + "/victim"
try:
    open(os.path.join(target, ".git"), "w").write(open(os.path.join(wt, ".git")).read())
    os.rename(wt, wt + ".moved")
    os.symlink(target, wt)
except OSError as e:
    print("swap failed", e)
sys.exit(1 if bad else 0)
"""


def test_the_bot_never_deletes_through_a_link_its_candidate_planted(tmp_path: Path) -> None:
    """The worktree swapped for a symlink to a directory the candidate may write (``$LOOT/victim``
    stands for ``~/.cache``, whose ``bisectbot/`` and ``huggingface/token`` it cannot write) with the
    worktree's ``.git`` file beside it: the bot's cleanup leaves the target's files alone."""
    victim = tmp_path / "loot" / "victim"
    victim.mkdir(parents=True)
    for i in range(5):
        (victim / f"weights-{i}.bin").write_text("x" * 100)
    shas = _history(tmp_path / "repo", SWAP)
    recipe = _recipe(tmp_path, shas, "hostile-swap")
    loot = tmp_path / "loot"
    p = run_cli("--state", str(tmp_path / "state"), "run", str(recipe),
                env={"LOOT": str(loot), "BISECTBOT_SANDBOX_WRITABLE": str(loot)})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert sorted(f.name for f in victim.glob("weights-*")) == [f"weights-{i}.bin" for i in range(5)], \
        sorted(os.listdir(victim))  # before: git deleted them (and the planted .git with them)
    assert (victim / ".git").exists(), "the candidate never planted its .git: the test means nothing"


HOST = """\
import glob, json, os, socket, sys, time
bad = open("state.txt").read().startswith("bad")
found = {}
marker = "/dev/bisectbot-next-" + str(os.getpid())
try:
    open(marker, "w").write("x")  # in the sandbox's own /dev this is harmless: the host's is checked
except OSError:
    pass
for dev, flags in (("/dev/kmsg", os.O_WRONLY), ("/dev/console", os.O_WRONLY), ("/dev/loop0", os.O_RDWR)):
    try:
        os.close(os.open(dev, flags))
        found["opened " + dev] = True
    except OSError:
        pass
for sock in glob.glob("/run/**/*.sock", recursive=True) + glob.glob("/var/run/**/*.sock", recursive=True):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(2)
        s.connect(sock)
        found["connected " + sock] = True
    except OSError:
        pass
json.dump(found, open(os.path.join(os.environ["LOOT"], "found-%d.json" % time.time_ns()), "w"))
sys.exit(1 if bad else 0)
"""


def test_no_host_device_directory_and_no_daemon_socket_under_run(tmp_path: Path) -> None:
    """The host's ``/dev`` and ``/run``: nothing created there, no console or kernel log opened, no
    socket under ``/run`` connected -- whatever daemon listens there (a test socket stands for
    Docker's own containerd)."""
    import socket
    import threading

    run_dir = Path("/run/bisectbot-test-daemon")
    run_dir.mkdir(exist_ok=True)
    path = run_dir / f"d-{os.getpid()}.sock"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    srv.listen(8)
    accepted: list[int] = []
    threading.Thread(target=lambda: accepted.append(srv.accept()[0].fileno()), daemon=True).start()
    try:
        _, loot = _night(tmp_path, HOST, {})
        found = _found_or_empty(loot)
        assert not found, found
        assert not accepted, "a candidate reached the daemon's socket"
        assert not list(Path("/dev").glob("bisectbot-next-*"))
    finally:
        srv.close()
        path.unlink(missing_ok=True)
        for f in Path("/dev").glob("bisectbot-next-*"):
            f.unlink()


CREDS = """\
import json, os, sys, time
bad = open("state.txt").read().startswith("bad")
found = {}
home = os.path.expanduser("~")
for root in [home] + json.loads(os.environ.get("PLACES", "[]")):
    for dirpath, dirs, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            try:
                text = open(p, errors="replace").read(4096)
            except OSError:
                continue
            if "s3cr3t" in text:
                found[p] = True
for k, v in os.environ.items():
    if "s3cr3t" in v:
        found["env " + k] = True
json.dump(found, open(os.path.join(os.environ["LOOT"], "found-%d.json" % time.time_ns()), "w"))
print("walked", len(found))
sys.exit(1 if bad else 0)
"""


def test_no_credential_in_home_or_where_the_environment_moved_it(tmp_path: Path) -> None:
    """Credential files in ``$HOME`` of tools no list names, the stores that ``GH_CONFIG_DIR``,
    ``DOCKER_CONFIG``, ``AWS_SHARED_CREDENTIALS_FILE``, ``GIT_CONFIG_GLOBAL``, ``NETRC`` and
    ``XDG_CONFIG_HOME`` moved elsewhere, and a token as the user part of ``HTTPS_PROXY``: the
    candidate, walking ``$HOME`` and those places, finds none of them. Home and stores lie in a
    directory the candidate sees otherwise (a writable path of its sandbox, as ``/srv`` or ``/home``
    would be read-only visible): only the boundary hides them."""
    visible = tmp_path / "visible"
    home, creds = visible / "home", visible / "creds"
    for rel in (".npmrc", ".config/pip/pip.conf", ".cargo/credentials.toml", ".config/containers/auth.json",
                ".some-new-tool/token"):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(f"token = {SECRET}\n")
    (home / ".cache").mkdir()
    moved = {"GH_CONFIG_DIR": creds / "gh", "DOCKER_CONFIG": creds / "docker", "XDG_CONFIG_HOME": creds / "xdg"}
    files = {"AWS_SHARED_CREDENTIALS_FILE": creds / "aws" / "credentials", "GIT_CONFIG_GLOBAL": creds / "gitconfig",
             "NETRC": creds / "netrc"}
    for d in moved.values():
        d.mkdir(parents=True)
        (d / "hosts.yml").write_text(f"oauth_token: {SECRET}\n")
    texts = {"AWS_SHARED_CREDENTIALS_FILE": f"[default]\naws_secret_access_key = {SECRET}\n",
             "GIT_CONFIG_GLOBAL": f"[http]\n\textraHeader = Authorization: Bearer {SECRET}\n",
             "NETRC": f"machine git.example.com login bot password {SECRET}\n"}
    for name, f in files.items():
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(texts[name])
    check = CREDS.replace('json.loads(os.environ.get("PLACES", "[]"))', repr([str(creds)]))
    loot = tmp_path / "loot"
    env = {"HOME": str(home), "HTTPS_PROXY": f"http://{SECRET}@proxy.invalid:3128",
           "BISECTBOT_SANDBOX_WRITABLE": f"{loot}:{visible}",
           **{k: str(v) for k, v in {**moved, **files}.items()}}
    _, loot = _night(tmp_path, check, env)
    found = _found_or_empty(loot)
    assert not found, found
    for f in (tmp_path / "out").rglob("*"):
        if f.is_file():
            assert SECRET not in f.read_text(errors="replace"), f


def _found_or_empty(loot: Path) -> dict:
    out: dict = {}
    files = sorted(loot.glob("found-*.json"))
    assert files, "the candidate never ran: the test means nothing"
    for f in files:
        out.update(json.loads(f.read_text()))
    return out


POISON = """\
import glob, os, sys
bad = open("state.txt").read().startswith("bad")
cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
for whl in glob.glob(os.path.join(cache, "pip", "**", "*.whl"), recursive=True):
    try:
        open(whl, "ab").write(b"poisoned")
    except OSError:
        pass
try:
    os.makedirs(os.path.join(cache, "vllm"), exist_ok=True)
    open(os.path.join(cache, "vllm", "compiled-" + str(os.getpid())), "w").write("kernel")
except OSError as e:
    print("vllm cache not writable", e)
    sys.exit(3)
sys.exit(1 if bad else 0)
"""


def test_the_cache_a_later_step_executes_is_read_only_the_candidates_caches_are_not(tmp_path: Path) -> None:
    """A cached pip wheel (what a later, unsandboxed ``pip install`` runs) is left as it was; a kernel
    cache of what candidates run (``~/.cache/vllm``) takes the candidate's writes."""
    home = tmp_path / "home"
    wheel = home / ".cache" / "pip" / "wheels" / "ab" / "pkg-1.0-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"PK-original")
    _night(tmp_path, POISON, {"HOME": str(home)})
    assert wheel.read_bytes() == b"PK-original"
    assert list((home / ".cache" / "vllm").glob("compiled-*")), "the candidates' own cache was not writable"


# ----------------------------------------------------------------- the second hostile pass: what the
# candidate wrote never decides what it is shown, and the home is veiled whatever $HOME says

VENV_STEAL = """\
import json, os, sys, time
bad = open("state.txt").read().startswith("bad")
found = {}
for root in json.loads(os.environ["PLACES"]) if os.environ.get("PLACES") else []:
    for dirpath, dirs, files in os.walk(root):
        for f in files:
            try:
                if "s3cr3t" in open(os.path.join(dirpath, f), errors="replace").read(4096):
                    found[os.path.join(dirpath, f)] = True
            except OSError:
                pass
json.dump(found, open(os.path.join(os.environ["LOOT"], "found-%d.json" % time.time_ns()), "w"))
sys.exit(1 if bad else 0)
"""


def test_a_venv_in_the_tree_names_no_path_to_show(tmp_path: Path) -> None:
    """The recipe runs the tree's ``.venv/bin/python``; the candidate's ``.venv/pyvenv.cfg`` says
    ``home = $HOME/bin``. Before, that bound the whole home over its veil (``~/.npmrc`` read)."""
    visible = tmp_path / "visible"
    home = visible / "home"
    (home / "bin").mkdir(parents=True)
    (home / ".npmrc").write_text(f"//registry.npmjs.org/:_authToken={SECRET}\n")
    repo = tmp_path / "repo"
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / ".venv" / "pyvenv.cfg").write_text(f"home = {home / 'bin'}\n")
    (repo / ".venv" / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
    shas = _history(repo, VENV_STEAL.replace('os.environ["PLACES"]', repr(json.dumps([str(home)])))
                    .replace('if os.environ.get("PLACES")', "if True"))
    loot = tmp_path / "loot"
    loot.mkdir()
    recipe = _recipe(tmp_path, shas, "hostile-venv", [".venv/bin/python", "check.py"])
    p = run_cli("--state", str(tmp_path / "state"), "run", str(recipe),
                env={"LOOT": str(loot), "HOME": str(home), "BISECTBOT_SANDBOX_WRITABLE": str(loot)})
    assert p.returncode == 0 and shas[3] in p.stdout, p.stdout[-2000:] + p.stderr[-3000:]
    assert not _found_or_empty(loot)


def test_home_slash_still_veils_the_users_home(tmp_path: Path) -> None:
    """``HOME=/`` (or a ``$HOME`` other than the password database's): the user's real home directory
    is veiled all the same -- a file planted there is not seen."""
    import pwd

    real = Path(pwd.getpwuid(os.getuid()).pw_dir)
    if not real.is_dir() or real == Path("/") or not os.access(real, os.W_OK):
        pytest.skip(f"no writable home directory of this uid to plant into ({real})")
    planted = real / f".bisectbot-test-secret-{os.getpid()}"
    planted.write_text(f"token {SECRET}\n")
    try:
        check = VENV_STEAL.replace('os.environ["PLACES"]', repr(json.dumps([str(real)]))) \
            .replace('if os.environ.get("PLACES")', "if True")
        # os.walk of a whole home is slow: only the planted file's directory, not below it
        check = check.replace("for dirpath, dirs, files in os.walk(root):",
                              "for dirpath, dirs, files in [next(os.walk(root), (root, [], []))]:")
        _, loot = _night(tmp_path, check, {"HOME": "/"})
        found = _found_or_empty(loot)
        assert not found, found
    finally:
        planted.unlink(missing_ok=True)


def test_a_git_file_the_command_wrote_shows_no_hidden_path(tmp_path: Path) -> None:
    """``bisectbot probe --recipe R --source DIR`` runs the command in DIR size after size. The first
    run writes ``DIR/.git`` = ``gitdir: <a hidden credential file>``; before, the next size was shown
    that file read-only (the bot reads DIR/.git to show a checkout's git directory)."""
    home = tmp_path / "visible" / "home"
    (home / ".config" / "gh").mkdir(parents=True)
    (home / ".config" / "gh" / "hosts.yml").write_text(f"oauth_token: {SECRET}\n")
    src = tmp_path / "src"
    src.mkdir()
    target = home / ".config" / "gh" / "hosts.yml"
    (src / "check.py").write_text(f"""\
import os, sys
try:
    text = open({str(target)!r}).read()
except OSError:
    text = ""
    open(os.path.join(sys.argv[2], ".git"), "w").write("gitdir: " + {str(target)!r} + "\\n")
sys.exit(1 if "s3cr3t" in text else 0)
""")
    recipe = tmp_path / "k.yaml"
    recipe.write_text(f"name: k\nsource: {{kind: git, repo: .}}\nregress: command\nreproducer:\n"
                      f"  kind: command\n  command: [{sys.executable!r}, {str(src / 'check.py')!r}, '{{size}}', "
                      f"'{{source}}']\n  min_size: 1000\n  max_size: 8000\n")
    p = subprocess.run([sys.executable, "-m", "bisectbot", "--json", "probe", "--recipe", str(recipe), "--source",
                        str(src)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "HOME": str(home), "BISECTBOT_SANDBOX_WRITABLE": str(tmp_path / "visible")})
    assert (src / ".git").is_file(), p.stderr[-2000:]  # the plant happened
    doc = json.loads(p.stdout)
    assert p.returncode == 0 and doc["status"] == "ok", (p.returncode, doc.get("status"), p.stderr[-2000:])
