"""Every candidate process the bot starts on the host runs inside a sandbox (issue 36, input 3).

The local runner builds, serves and runs the commits under test on the host. Each such process
(build command, server, command reproducer) is started through **bubblewrap** (``bwrap``,
Debian's ``bubblewrap``): the small, kept tool that Flatpak and GNOME use for exactly this --
unprivileged namespaces, one command line, no daemon, no image to build, starts in
milliseconds. ``unshare(1)`` gives the namespaces but no way to lay out a file system view
without a script of ``mount`` calls running as root; systemd-run needs systemd as PID 1, which
CI containers lack. What a candidate gets (:func:`wrap`):

* **its own PID namespace** (``--unshare-pid``, plus IPC, UTS and cgroup): it sees neither the
  bot, nor the bot's git children, nor other probes (``/proc`` is the namespace's own), and when
  the probe's process ends -- or the bot kills it, or the bot dies (``--die-with-parent``) --
  the kernel kills everything it started: no ``setsid`` survivor outlives the probe.
* **its own mount namespace**: the host read-only (``--ro-bind / /``); a fresh ``/tmp``,
  ``/var/tmp``, ``/dev/shm`` and ``/run`` (:func:`_private_run`); its own ``/dev`` with the host's
  GPU nodes only (:data:`GPU_DEVICES`); ``$HOME`` veiled (:func:`veiled`: a fresh tmpfs showing
  only what is bound below it); writable only the candidate's own tree, the candidates' own
  caches below the user's cache directory (:data:`CANDIDATE_CACHES`; the rest of it read-only)
  and the paths of ``$BISECTBOT_SANDBOX_WRITABLE`` (``:``-separated); hidden (an empty directory or file in
  their place) the bot's state directories (every ledger the process opened), the credential
  files of ``$HOME`` (:data:`HIDDEN_HOME`) and the stores :data:`CREDENTIAL_ENV` moved elsewhere,
  ``$RUNNER_TEMP``, the Actions runner's credential files and the
  directories of the job's ``GITHUB_ENV``/``GITHUB_OUTPUT``/``GITHUB_STEP_SUMMARY``/
  ``GITHUB_PATH``/``GITHUB_STATE`` files; read-only the repositories' git directories (no
  hook, config or ref a candidate could plant), the bot's work directory (other probes'
  trees), its logs and its cache (``~/.cache/bisectbot``).
* **its own network namespace** (``--unshare-net``; recipe ``server.network: loopback``, the
  default): only a private ``lo``. No registry, cloud metadata service, TCP Docker daemon, other
  loopback service of the host, nor the host's abstract Unix sockets. A server candidate is
  reached through a :class:`ServerBridge`: the bot listens on the host's 127.0.0.1:PORT (a thread
  of the bot) and connects, per request, to a Unix socket in a directory bound into the sandbox
  (``/tmp/.bisectbot-net``), where the sandbox's wrapper (:data:`_INSIDE`, started by bwrap before
  it execs the server) connects on to 127.0.0.1:PORT of the sandbox's own ``lo``. A dead forwarder
  closes the bot's connection: a connection error (server trouble), never a reply.
  ``server.network: host`` keeps the host's network (a build that downloads wheels).
* the same uid as the bot (its tree is the bot's files), without any capability (as root
  ``--cap-drop ALL``: :func:`_caps`); the credential files, global git configuration and
  container daemons' sockets hidden (:data:`HIDDEN_HOME`, :data:`DAEMON_SOCKETS`); no secret in its environment
  (:func:`bisectbot.secrets.candidate_env`, and :func:`bisectbot.secrets.take_secrets` emptied
  the bot's own).

Fail closed: where ``bwrap`` is missing or the host refuses namespaces (no user namespaces for
an unprivileged user, a seccomp profile that blocks ``clone``), :func:`require` raises
:class:`SandboxUnavailable` naming the missing capability, before any candidate runs.
``BISECTBOT_SANDBOX=off`` opts out explicitly (candidates then run as before, on the host).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

from .errors import BisectbotError, HostFailure

MODE_ENV = "BISECTBOT_SANDBOX"
"""``off`` (also ``0``, ``no``, ``false``) runs candidates without the sandbox; anything else, or
unset, requires it."""
WRITABLE_ENV = "BISECTBOT_SANDBOX_WRITABLE"
"""More host paths a candidate may write (``:``-separated, absolute)."""
NETWORKS = ("loopback", "host")
"""Network of a candidate (recipe ``server.network``): ``loopback``, its own namespace with only a
private ``lo`` (the default); ``host``, the host's network namespace."""
BRIDGE_DIR = "/tmp/.bisectbot-net"
"""Where a server candidate's bridge directory appears inside its sandbox (in its private ``/tmp``)."""

HIDDEN_HOME = (".netrc", ".git-credentials", ".config/git/credentials", ".docker", ".ssh", ".gnupg",
               ".config/gh", ".aws", ".azure", ".kube", ".pypirc", ".huggingface", ".cache/huggingface/token",
               ".cache/huggingface/stored_tokens",
               ".config/gcloud", ".local/state/bisectbot", ".env", ".gitconfig", ".config/git/config")
"""Paths below ``$HOME`` a candidate never sees (credentials, the user's global git configuration --
``credential.*`` helpers, ``url.*.insteadOf`` with a token, ``http.*.extraHeader`` -- and the bot's
default state directory)."""

DAEMON_SOCKETS = ("/run/docker.sock", "/var/run/docker.sock", "/run/containerd/containerd.sock",
                  "/run/podman/podman.sock", "/run/crio/crio.sock", "/run/buildkit/buildkitd.sock")
"""Container daemons' sockets a candidate never reaches (with one, ``docker inspect`` of its own
container shows the job's environment, and ``docker run -v /:/host`` is the host); also
``$DOCKER_HOST`` (``unix://``) and ``$XDG_RUNTIME_DIR/{docker.sock,podman/podman.sock}``."""

CREDENTIAL_ENV = ("XDG_CONFIG_HOME", "GH_CONFIG_DIR", "DOCKER_CONFIG", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
                  "GIT_CONFIG_GLOBAL", "NETRC", "PIP_CONFIG_FILE", "NPM_CONFIG_USERCONFIG", "CARGO_HOME",
                  "REGISTRY_AUTH_FILE", "KUBECONFIG", "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CONFIG_DIR",
                  "CLOUDSDK_CONFIG", "GNUPGHOME", "SSH_AUTH_SOCK")
"""Variables of the bot's environment that move a credential store out of ``$HOME`` (the tools'
documented overrides: gh, docker, AWS, git, curl/netrc, pip, npm, cargo, podman, kubectl, gcloud,
Azure, GnuPG, the ssh agent's socket): what each names is hidden like ``$HOME`` itself."""

CANDIDATE_CACHES = ("huggingface", "vllm", "torch", "triton", "torch_extensions", "flashinfer", "miopen",
                    "comgr", "aiter", "tvm", "cupy", "nv")
"""Subdirectories of the user's cache directory a candidate may write (created before it runs): the
caches of what candidates run -- model weights and the kernel/compiler caches of vLLM, PyTorch,
Triton, FlashInfer, MIOpen, ROCm's comgr, aiter, TVM, CuPy and CUDA. The rest of the cache
directory (pip's and uv's wheels, pre-commit's environments, the bot's own repositories) is read
only: a tool the bot or a later workflow step runs outside the sandbox reads it, and a candidate
that rewrote a cached wheel had its code run there (hostile pass of issue 36)."""

GPU_DEVICES = ("/dev/kfd", "/dev/dri", "/dev/nvidia[0-9]*", "/dev/nvidiactl", "/dev/nvidia-uvm*", "/dev/nvidia-modeset",
               "/dev/nvidia-caps")
"""The host's GPU device nodes (AMD: ``kfd``, ``dri``; NVIDIA: ``nvidia*``) a candidate server gets in
its own ``/dev`` (``bwrap --dev``: ``null``, ``zero``, ``random``, ``tty``... and nothing of the
host's); plus the paths of ``$BISECTBOT_SANDBOX_DEVICES`` (``:``-separated). With the host's whole
``/dev`` a root candidate created files there and opened ``/dev/kmsg`` for writing (hostile pass)."""

DEVICES_ENV = "BISECTBOT_SANDBOX_DEVICES"

RUNNER_FILES = (".credentials", ".credentials_rsaparams", ".runner", ".env", ".path")
"""Files of a self-hosted Actions runner's directory (above ``$RUNNER_TEMP``/../..) that a candidate never sees."""

JOB_FILES = ("GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_PATH", "GITHUB_STATE")
"""Variables naming the job's command files; their directories are hidden."""


class SandboxUnavailable(BisectbotError):
    """The host cannot give candidates their own namespaces; the message names what is missing
    and how to opt out. Exit code 1 (an error of the host, never a verdict)."""


_hidden: set[Path] = set()
_readonly: set[Path] = set()
_lock = threading.Lock()
_checked: str | None = None
_empty: str | None = None


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """False only when ``$BISECTBOT_SANDBOX`` opts out (``off``/``0``/``no``/``false``)."""
    env = os.environ if environ is None else environ
    return env.get(MODE_ENV, "").strip().lower() not in ("off", "0", "no", "false")


def protect(path: str | Path, how: str = "hide") -> None:
    """Keep ``path`` from every later candidate: ``hide`` (an empty directory or file in its place)
    or ``ro`` (visible, read-only). Called for each ledger's state directory and each repository's
    git directory. Raises ``ValueError`` for another ``how``."""
    if how not in ("hide", "ro"):
        raise ValueError(f"protect: how must be 'hide' or 'ro', not {how!r}")
    p = Path(path).resolve()
    with _lock:
        (_hidden if how == "hide" else _readonly).add(p)


def require() -> str:
    """The ``bwrap`` executable, checked once per process by starting ``true`` in the namespaces
    candidates get (a failed check is tried again as a failed setup is: :data:`SETUP_DELAYS_S`).
    Raises :class:`SandboxUnavailable` naming the missing tool or capability."""
    global _checked
    if _checked and os.access(_checked, os.X_OK):
        return _checked
    _checked = None  # checked once, gone since (removed mid-run): check again, fail closed
    exe = shutil.which("bwrap")
    hint = f"; or run candidates unconfined on purpose with {MODE_ENV}=off (README, 'Sandbox')"
    if exe is None:
        raise SandboxUnavailable("candidates run in a bubblewrap sandbox, and bwrap is not installed "
                                 "(Debian/Ubuntu: apt-get install bubblewrap)" + hint)
    argv = [exe, "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc", "--unshare-pid",
            "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try", "--die-with-parent", *_caps(),
            "--", "true"]
    for delay in (*SETUP_DELAYS_S, None):  # a host mount changing under the setup is a race (SETUP_DELAYS_S)
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise SandboxUnavailable(f"cannot start bwrap: {e}" + hint) from None
        if p.returncode == 0 or delay is None:
            break
        time.sleep(delay)
    if p.returncode != 0:
        why = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        raise SandboxUnavailable(f"this host refuses the namespaces a candidate's sandbox needs (PID, mount and "
                                 f"network namespaces; below root also user namespaces: kernel.unprivileged_userns_clone, "
                                 f"user.max_user_namespaces, or the container's seccomp profile): {why}" + hint)
    _checked = exe
    return exe


def _empty_file() -> str:
    """An empty read-only regular file, made once per process, bound over each hidden file: not
    ``/dev/null``, which bwrap's ``--ro-bind`` mounts ``nodev`` (opening it fails with EACCES, and
    git refuses to run when it cannot read ``~/.gitconfig``)."""
    global _empty
    if _empty is None or not os.path.isfile(_empty):
        fd, path = tempfile.mkstemp(prefix="bisectbot-hidden-")
        os.close(fd)
        os.chmod(path, 0o444)
        atexit.register(os.unlink, path)
        _empty = path
    return _empty


def _caps() -> list[str]:
    """``--cap-drop ALL`` when the bot runs as root: bwrap keeps a privileged caller's capabilities,
    and a candidate with ``CAP_SYS_ADMIN`` unmounts what hides the state directory or remounts
    ``/`` read-write (with ``CAP_SYS_PTRACE``/``CAP_DAC_OVERRIDE``, more). Below root bwrap grants
    none outside its own user namespace."""
    return ["--cap-drop", "ALL"] if os.geteuid() == 0 else []


def _under(p: Path, roots: Iterable[Path]) -> bool:
    return any(p == r or r in p.parents for r in roots)


def _home() -> Path | None:
    h = os.environ.get("HOME") or os.path.expanduser("~")
    return Path(h).resolve() if h and h != "/" else None


def user_cache() -> Path | None:
    """The user's cache directory (``$XDG_CACHE_HOME`` or ``~/.cache``), None without a home."""
    cache = os.environ.get("XDG_CACHE_HOME") or (str(_home() / ".cache") if _home() else "")
    return Path(cache) if cache and os.path.isabs(cache) else None


def candidate_caches() -> list[Path]:
    """The :data:`CANDIDATE_CACHES` below :func:`user_cache`, made when missing (a directory that
    does not exist cannot be bound, and the cache above it is read-only to the candidate)."""
    cache = user_cache()
    out = []
    for name in CANDIDATE_CACHES if cache is not None else ():
        p = cache / name
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        out.append(p)
    return out


def writable_paths(tree: Path, extra: Iterable[str | Path] = ()) -> list[Path]:
    """The host paths a candidate may write: its tree, the candidates' caches
    (:func:`candidate_caches`), ``$BISECTBOT_SANDBOX_WRITABLE`` and ``extra`` (those that exist)."""
    out = [Path(tree).resolve()]
    more = [*map(str, candidate_caches()), *os.environ.get(WRITABLE_ENV, "").split(":"), *map(str, extra)]
    for m in more:
        if m and os.path.isabs(m) and os.path.exists(m):
            out.append(Path(m).resolve())
    return out


def hidden_paths() -> list[Path]:
    """The paths a candidate never sees: :func:`protect`-ed ones, credentials below ``$HOME``,
    the runner's credential files and the job's command-file directories (those that exist)."""
    out = set(_hidden)
    for home in _homes():
        out.update(home / h for h in HIDDEN_HOME)
    # huggingface_hub keeps the login token and every stored one beside the weights (HF_HOME, or a
    # file HF_TOKEN_PATH names): the cache is the candidate's, the tokens are not
    hf_home = os.environ.get("HF_HOME")
    if hf_home and os.path.isabs(hf_home):
        out.update(Path(hf_home) / f for f in ("token", "stored_tokens"))
    hf_token_path = os.environ.get("HF_TOKEN_PATH")
    if hf_token_path and os.path.isabs(hf_token_path):
        out.add(Path(hf_token_path))
    temp = os.environ.get("RUNNER_TEMP")
    if temp:
        runner_root = Path(temp).resolve().parent.parent
        out.update(runner_root / f for f in RUNNER_FILES)
        # the job's step scripts (a secret in a `run:` line is in one) and file commands: all of it
        out.add(Path(temp).resolve())
    from .secrets import secret_env

    for name in CREDENTIAL_ENV:  # some are taken out of os.environ at start-up (secret-looking names)
        v = secret_env(name) or ""
        if v and os.path.isabs(v) and Path(v).resolve() != Path("/"):
            out.add(Path(v).resolve())
    cache = os.environ.get("XDG_CACHE_HOME")
    if cache and os.path.isabs(cache):
        out.update(Path(cache) / "huggingface" / f for f in ("token", "stored_tokens"))
    for name in JOB_FILES:
        f = os.environ.get(name)
        if f:
            out.add(Path(f).resolve().parent)
    socks = [*DAEMON_SOCKETS]
    host = os.environ.get("DOCKER_HOST", "")
    if host.startswith("unix://"):
        socks.append(host.removeprefix("unix://"))
    run_dir = os.environ.get("XDG_RUNTIME_DIR")
    if run_dir:
        socks += [os.path.join(run_dir, "docker.sock"), os.path.join(run_dir, "podman", "podman.sock")]
    out.update(Path(s).resolve() for s in socks if os.path.isabs(s))
    return sorted(p for p in out if os.path.lexists(p))


def readonly_paths(extra: Iterable[str | Path] = ()) -> list[Path]:
    """The paths a candidate sees read-only although they may lie below a writable one: the
    repositories' git directories, the bot's cache directory and ``extra`` (its work and log
    directories)."""
    out = set(_readonly) | {Path(e).resolve() for e in extra}
    cache = os.environ.get("BISECTBOT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or str((_home() or Path("/nonexistent")) / ".cache"), "bisectbot")
    # made now when missing: a directory that does not exist is not bound, and a candidate could then
    # create it below its writable ~/.cache and plant repositories (git config that runs commands) or
    # release files the bot later trusts (hostile pass)
    try:
        os.makedirs(cache, exist_ok=True)
    except OSError:
        pass
    out.add(Path(cache).resolve())
    user = user_cache()
    if user is not None:  # read only but for the candidates' own caches (writable_paths)
        out.add(user.resolve())
    return sorted(p for p in out if os.path.exists(p))


#: The host directories a candidate gets fresh and empty (its own ``/tmp``): what lies there on the
#: host is visible to it only when its command names it (:func:`named_paths`).
PRIVATE_DIRS = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))


def _venv_root(p: Path) -> Path | None:
    """The virtualenv an interpreter ``p`` (``ROOT/bin/python3``) belongs to: ``ROOT`` when
    ``ROOT/pyvenv.cfg`` exists (PEP 405), else None."""
    root = p.parent.parent
    return root if p.parent.name == "bin" and (root / "pyvenv.cfg").is_file() else None


def _python_prefix(exe: Path) -> Path | None:
    """The installation prefix of a Python interpreter ``PREFIX/bin/pythonX.Y`` (``PREFIX/lib/pythonX*/os.py``
    exists), else None."""
    if not exe.name.startswith("python") or exe.parent.name != "bin":
        return None
    prefix = exe.parent.parent
    return prefix if any(prefix.glob("lib/python3*/os.py")) else None


def _import_paths(venv: Path) -> set[Path]:
    """Directories a virtualenv's own ``site-packages`` puts on its import path outside it: the absolute
    directories its ``*.pth`` files list and the package directories of an editable install's finder
    (setuptools' ``__editable__*_finder.py``: ``MAPPING = {'pkg': '/src/pkg'}``). The virtualenv is the
    recipe's (a trusted path), so what it imports is shown with it: an editable install of the bot in a
    checkout under ``/tmp`` or the home ran the demo's engine as ``No module named 'bisectbot'`` (new-user
    pass of issue 40)."""
    import ast
    import re

    def text(f: Path) -> str:  # a regular file's first MiB; a FIFO, a device or a link to one is no .pth
        try:
            if not stat.S_ISREG(os.lstat(f).st_mode):
                return ""
            with open(f, "rb") as fh:
                return fh.read(1 << 20).decode("utf-8", "replace")
        except OSError:
            return ""

    out: set[Path] = set()
    for sp in venv.glob("lib/python3*/site-packages"):
        for pth in sp.glob("*.pth"):
            for ln in text(pth).splitlines()[:1000]:
                if os.path.isabs(ln.strip()) and "\x00" not in ln:
                    out.add(Path(ln.strip()))
        for finder in sp.glob("__editable__*finder.py"):
            m = re.search(r"^MAPPING\b[^=\n]*=\s*(\{.*\})\s*$", text(finder), re.M)
            try:
                mapping = ast.literal_eval(m.group(1)) if m and len(m.group(1)) < 65536 else {}
            except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
                continue
            if isinstance(mapping, dict):
                out |= {Path(v) for v in mapping.values() if isinstance(v, str) and os.path.isabs(v) and "\x00" not in v}
    return {p for p in out if os.path.isdir(p)}


def _showable(p: Path, hide: Iterable[Path]) -> bool:
    """True when a named path may be shown read-only: judged by where it leads (``readonly_paths`` binds
    the resolved path, so a symlink or a ``..`` spelling past a hidden directory showed what lies below
    it), never under a hidden path, and never a directory the sandbox gives fresh and empty -- ``/tmp``,
    ``/run``, a veiled home -- or one above it (it would show the host's whole directory: a daemon's
    socket in ``/run``, the user's files at home); only paths below them are a program's own."""
    try:
        r = p.resolve()
    except (OSError, RuntimeError, ValueError):
        return False
    if len(r.parts) < 2 or _under(r, hide) or _under(p, hide):
        return False
    fresh = [Path(d).resolve() for d in (*PRIVATE_DIRS, "/run", "/var/run")] + [h.resolve() for h in veiled()]
    return not any(_under(f, [r]) for f in fresh)


def named_paths(argv: list[str], cwd: str | Path | None, env: dict[str, str],
                untrusted: Iterable[Path] = ()) -> list[Path]:
    """Host paths ``argv`` names that the sandbox would otherwise hide by giving the candidate an
    empty ``/tmp`` (:data:`PRIVATE_DIRS`): the program (``argv[0]``, as ``Popen`` finds it: relative
    to ``cwd`` or on ``env["PATH"]``) and every absolute path argument that exists -- with, for an
    interpreter of a virtualenv, the whole virtualenv (its ``pyvenv.cfg`` and ``site-packages``),
    the directories it imports from outside itself (:func:`_import_paths`: an editable install's
    source), and the base interpreter's prefix that ``pyvenv.cfg`` names. A recipe that runs
    ``/tmp/x/.venv/bin/python check.py`` or ``/tmp/repro/run.sh`` means those files; they are
    shown read-only. Paths under :func:`hidden_paths` are never shown, and a path below
    ``untrusted`` (what a candidate may write: its tree) names nothing more -- neither a symlink's
    target nor a ``pyvenv.cfg``'s ``home`` there is followed: the candidate wrote them (a tree's
    ``.venv/pyvenv.cfg`` with ``home = $HOME/bin`` bound the whole home over its veil, second
    hostile pass of issue 36)."""
    untrusted = [Path(u) for u in untrusted]
    prog = argv[0] if argv else ""
    prog_path: Path | None = None
    if "/" in prog:
        prog_path = Path(os.path.join(str(cwd or "."), prog))
    elif prog:
        w = shutil.which(prog, path=env.get("PATH"))
        prog_path = Path(w) if w else None
    found = ([prog_path] if prog_path else []) + [Path(a) for a in argv[1:] if os.path.isabs(a) and os.path.exists(a)]
    out: set[Path] = set()
    for f in found:
        if _under(Path(os.path.abspath(f)), untrusted) or _under(f.resolve(), untrusted):
            # visible as the candidate's own; what it points at is its choice, not the recipe's. Only
            # the program its command runs is shown (a tree's .venv/bin/python -> a pyenv Python in
            # $HOME): that executable file, and the installation of a Python interpreter
            t = f.resolve()
            if f is prog_path and not _under(t, untrusted) and t.is_file() and os.access(t, os.X_OK):
                out.add(t)
                prefix = _python_prefix(t)
                if prefix is not None:
                    out.add(prefix)
            continue
        for q in {Path(os.path.abspath(f)), f.resolve()}:
            out.add(q)
            root = _venv_root(Path(os.path.abspath(q)))
            if root is not None:
                out.add(root.resolve())
                out |= _import_paths(root)
                try:
                    home = next((ln.split("=", 1)[1].strip() for ln in (root / "pyvenv.cfg").read_text().splitlines()
                                 if ln.split("=", 1)[0].strip() == "home"), "")
                except OSError:
                    home = ""
                if home and os.path.isabs(home):
                    out.add(Path(home).resolve().parent)
    hide = hidden_paths()
    hide += [h.resolve() for h in hide]
    private = [*PRIVATE_DIRS, Path("/run"), *veiled()]  # what the sandbox gives fresh and empty
    return sorted(q for q in out if os.path.exists(q) and _under(q, private) and _showable(q, hide))


# --------------------------------------------------------------------------- did the candidate start?

_LAUNCH = r"""
import os, sys
fd, argv = int(sys.argv[1]), sys.argv[2:]
os.write(fd, b"S")
os.set_inheritable(fd, False)
raw = open("/proc/self/environ", "rb").read().split(b"\0")
env = dict(v.split(b"=", 1) for v in raw if b"=" in v)
try:
    os.execvpe(argv[0], argv, env)
except OSError as e:
    os.write(fd, b"E%d %s" % (e.errno, (e.strerror or "").encode()))
    os._exit(126 if e.errno in (13, 8) else 127)
"""
"""What runs first inside a sandbox (``python -I -S -c``, the bot's interpreter, no site packages):
it writes ``S`` on the launch pipe (the sandbox is set up: bwrap reached its command), then execs
the candidate's command with the environment the process was given (``/proc/self/environ``: the
interpreter's own locale coercion never reaches the candidate). The pipe is closed on exec; when
exec fails it writes ``E<errno> <reason>`` and exits 126 or 127, as a shell does."""

SETUP_DELAYS_S = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2)
"""Seconds between the attempts to set up one sandboxed process (eight attempts, ~6.4 s in all).
bwrap binds the host's ``/`` with its mounts, lists them and remounts each read-only; a mount of
the host that appears or vanishes between the listing and the remount (Docker mounting a
container's layers, another probe's mount namespace; the CI failure of issue 36's stop, on a host
whose ``/`` propagates mounts) fails that setup with ``Unable to apply mount flags`` -- a race, not
a state. Measured here: four processes mounting and unmounting a tmpfs as fast as the kernel
allows, under a shared ``/``, failed 72 of 200 setups (p = 0.36). Attempts are independent, so all
eight fail with p**8 < 0.03 % under that churn, and a failure that outlasts ~6 s of doubling
waits is a state of the host (or of bwrap), reported as :class:`SandboxSetupFailed`."""


class SandboxSetupFailed(HostFailure):
    """bwrap could not set up a candidate's sandbox in any of the attempts of :data:`SETUP_DELAYS_S`
    (it never reached the candidate's command). The host, never a verdict: the run stops, nothing
    is recorded (exit 1)."""


class Launch:
    """The pipe over which a sandboxed process says that its sandbox was set up (:data:`_LAUNCH`).

    Made per attempt; :func:`wrap` with ``launch=`` puts the launcher before the command, and the
    process must be started with ``pass_fds=launch.pass_fds`` (then call :meth:`spawned`). A
    candidate never holds the pipe (it is closed on exec), and it cannot take back the ``S``
    written before it ran: its own exit code, whatever it prints (``bwrap: ...`` included), never
    reads as a failed setup, and a failed setup never reads as the candidate's exit."""

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        self.data = b""

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self._w,) if self._w >= 0 else ()

    @property
    def fd(self) -> int:
        return self._w

    def spawned(self) -> None:
        """Close the bot's write end (after the process started, or failed to)."""
        if self._w >= 0:
            os.close(self._w)
            self._w = -1

    def _read(self) -> None:
        while self._r >= 0:
            try:
                chunk = os.read(self._r, 4096)
            except BlockingIOError:
                return
            if not chunk:
                return
            self.data += chunk

    def wait_setup(self, alive: Callable[[], bool], timeout_s: float) -> bool | None:
        """Wait until the sandbox is set up (True), the process ended without reaching its command
        (False), or ``timeout_s`` seconds passed (None). ``alive()`` says whether the process runs."""
        import select

        deadline = time.monotonic() + timeout_s
        while True:
            self._read()
            if self.data.startswith(b"S"):
                return True
            if not alive():
                self._read()
                return self.data.startswith(b"S")
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            select.select([self._r], [], [], min(left, 0.05))

    def set_up(self) -> bool:
        """After the process ended: whether its sandbox was set up (the launcher ran)."""
        self._read()
        return self.data.startswith(b"S")

    def exec_failure(self, argv0: str) -> tuple[int, str] | None:
        """``(126 or 127, reason)`` when the launcher could not exec the command (as a shell reports
        a command it cannot run); None when it ran or the sandbox was never set up."""
        self._read()
        if not self.data.startswith(b"SE"):
            return None
        num, _, why = self.data[2:].decode(errors="replace").partition(" ")
        rc = 126 if num in ("13", "8") else 127
        return rc, (f"cannot run {argv0!r} inside the candidates' sandbox: {why or 'errno ' + num} (its /tmp is "
                    f"private; a path the command names is shown, one it only reaches indirectly is not)")

    def close(self) -> None:
        self.spawned()
        if self._r >= 0:
            os.close(self._r)
            self._r = -1


def ended(launch: Launch | None, argv0: str) -> tuple[int, str] | None:
    """:meth:`Launch.exec_failure` of a process that has ended, then the pipe closed; None for no
    launch (the sandbox off)."""
    if launch is None:
        return None
    try:
        return launch.exec_failure(argv0)
    finally:
        launch.close()


R = TypeVar("R")


def launched(start: Callable[[Launch | None], R], why: Callable[[R], str], *, what: str,
             sleep: Callable[[float], None] = time.sleep) -> tuple[R, Launch | None]:
    """``(result, launch)`` of ``start(launch)`` -- which starts one sandboxed process with a fresh
    :class:`Launch` (``wrap(..., launch=launch)``, ``pass_fds=launch.pass_fds``) and returns once it
    ended or, for a server, once :meth:`Launch.wait_setup` answered -- started again while bwrap
    could not set the sandbox up (:data:`SETUP_DELAYS_S`). ``why(result)`` is the failed attempt's
    last words (bwrap's message). ``launch`` is None with the sandbox off (``start(None)`` once).
    Raises :class:`SandboxSetupFailed` naming ``what`` and bwrap's message when every attempt failed."""
    if not enabled():
        return start(None), None
    last = ""
    for delay in (*SETUP_DELAYS_S, None):
        launch = Launch()
        try:
            result = start(launch)
        except BaseException:
            launch.close()
            raise
        launch.spawned()
        if launch.set_up():
            return result, launch
        launch.close()
        last = " ".join((why(result) or "").split())[-300:] or "no message"
        if delay is not None:
            sleep(delay)
    raise SandboxSetupFailed(f"{what}: the candidates' sandbox could not be set up in {len(SETUP_DELAYS_S) + 1} "
                             f"attempts over {sum(SETUP_DELAYS_S):.1f} s (bwrap: {last}); the host, not the "
                             f"candidate -- nothing recorded")


def devices() -> list[Path]:
    """The host device nodes a candidate gets (:data:`GPU_DEVICES`, ``$BISECTBOT_SANDBOX_DEVICES``)
    that exist."""
    import glob

    pats = [*GPU_DEVICES, *(d for d in os.environ.get(DEVICES_ENV, "").split(":") if d)]
    return sorted({Path(m) for pat in pats if pat.startswith("/dev/") for m in glob.glob(pat)})


def veiled() -> list[Path]:
    """The directories a candidate sees as empty and its own (only what is bound below them shows):
    ``$HOME`` and the user's home directory of the password database (they differ under ``sudo``,
    ``docker run -u``, ``HOME=/``: second hostile pass of issue 36), each when it is a directory
    below ``/`` that holds no system directory."""
    out = []
    for home in _homes():
        if len(home.parts) < 2 or not home.is_dir():
            continue
        if any(_under(Path(sysdir), [home]) for sysdir in ("/usr", "/etc", "/bin", "/lib", "/opt", "/var")):
            continue
        out.append(home)
    return sorted(set(out))


def _homes() -> list[Path]:
    """``$HOME`` (unless ``/``) and the password database's home of this uid, resolved."""
    import pwd

    out = []
    h = os.environ.get("HOME")
    if h and h != "/" and os.path.isabs(h):
        out.append(Path(h).resolve())
    try:
        pw = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        pw = ""
    if pw and pw != "/" and os.path.isabs(pw):
        out.append(Path(pw).resolve())
    return list(dict.fromkeys(out))


def _private_run(network: str) -> list[str]:
    """bwrap arguments for an empty ``/run`` (and ``/var/run`` where it is no link to it): no daemon's
    socket of the host (Docker's own containerd at ``/run/docker/containerd/containerd.sock`` is root
    on the host: hostile pass of issue 36), whatever its path. With ``network: host`` the resolver
    configuration ``/etc/resolv.conf`` may point into ``/run`` (systemd-resolved): its target is shown
    read-only."""
    out: list[str] = []
    for d in ("/run", "/var/run"):
        if os.path.isdir(d) and not os.path.islink(d):
            out += ["--tmpfs", d]
    if network == "host" and os.path.islink("/etc/resolv.conf"):
        target = Path("/etc/resolv.conf").resolve()
        if target.exists() and _under(target, [Path("/run"), Path("/var/run")]):
            out += ["--ro-bind", str(target), str(target)]
    return out


def _launcher_python() -> str:
    """The interpreter of the launcher and the bridge's wrapper (``-I -S``: the standard library only):
    the base interpreter of the bot's virtualenv, resolved. The bot's own virtualenv may lie where a
    candidate sees nothing (the workflow installs it below ``$RUNNER_TEMP``, which is hidden: the
    token-walk act test, ``bwrap: execvp .../tmp/venv-N/bin/python: No such file or directory``)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return str(Path(base).resolve())


def wrap(argv: list[str], *, tree: str | Path, env: dict[str, str], cwd: str | Path | None = None,
         readonly: Iterable[str | Path] = (), writable: Iterable[str | Path] = (), network: str = "loopback",
         bridge: ServerBridge | None = None, home: str | Path | None = None,
         launch: Launch | None = None, hidden: Iterable[str | Path] = ()) -> tuple[list[str], dict[str, str]]:
    """``(argv, env)`` that run ``argv`` inside the sandbox (module docstring), its tree ``tree``
    writable. ``env`` is the candidate's (allow-listed) environment; ``TMPDIR`` becomes ``/tmp``
    unless it lies in a writable path. ``readonly``: more paths seen read-only (the bot's work and
    log directories; the tree itself stays writable even below them). ``network`` (:data:`NETWORKS`):
    ``loopback`` gives the process its own network namespace; ``bridge``, with ``loopback``, makes
    ``argv`` a server the bot reaches on ``127.0.0.1:bridge.port`` (it must listen on that port of
    its own ``lo``; see :class:`ServerBridge`). ``home``: a directory of the candidate's own (made
    here) that stands in for each veiled home (:func:`veiled`), so what its build writes there
    (``~/.triton``, ``pip install --user``) is there for its server; without it a fresh tmpfs per
    process. ``launch``: the process starts through the launcher (:data:`_LAUNCH`; with ``bridge``
    the bridge's wrapper) that reports on ``launch``'s pipe whether the sandbox was set up -- start it
    with ``pass_fds=launch.pass_fds`` (:func:`launched`). ``hidden``: more directories the process does not
    see (an empty read-only directory in their place; a writable path below one is still bound there:
    the keyed caches of :mod:`bisectbot.run.caches`, whose root hides every other key's). Returns them
    unchanged when :func:`enabled` is
    False. Raises :class:`SandboxUnavailable` (see :func:`require`), ``ValueError`` for another
    ``network``, and ``FileNotFoundError`` / ``PermissionError`` when ``argv[0]`` cannot be run
    (as ``Popen`` would)."""
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {', '.join(NETWORKS)}, not {network!r}")
    if not enabled():
        return argv, env
    exe = require()
    prog = argv[0]
    if "/" in prog:  # as Popen: relative to the working directory
        path = os.path.join(str(cwd or "."), prog)
        if not os.path.isfile(path):
            raise FileNotFoundError(2, "No such file or directory", prog)
        if not os.access(path, os.X_OK):
            raise PermissionError(13, "Permission denied", prog)
    elif shutil.which(prog, path=env.get("PATH")) is None:
        raise FileNotFoundError(2, "No such file or directory", prog)
    rw = writable_paths(Path(tree), writable)
    hide = hidden_paths() + [Path(h).resolve() for h in hidden if os.path.isdir(h)]
    named = [p for p in named_paths(argv, cwd, env, untrusted=rw) if not _under(p, rw) and _showable(p, hide)]
    if launch is not None or (bridge is not None and network == "loopback"):  # the bot's own interpreter
        named += [p for p in named_paths([_launcher_python()], None, env, untrusted=rw)
                  if not _under(p, rw) and _showable(p, hide)]
    ro = readonly_paths([*readonly, *named])
    out = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
           "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/dev/shm",
           "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", *_caps()]
    for dev in devices():
        out += ["--dev-bind", str(dev), str(dev)]
    out += _private_run(network)
    if network == "loopback":
        out.append("--unshare-net")
    # a deeper path's rule wins over its ancestors' (mounts made later cover earlier ones): the
    # tree lies below the read-only work directory, which may lie below a hidden state directory;
    # a repository's git directory or a state directory below a writable one. Same depth:
    # writable, then read-only, then hidden.
    remount: list[str] = []  # hidden directories become read-only once every mount point below them exists
    # the home directory is veiled: a fresh, writable tmpfs (kind -1, made before anything at its
    # depth is bound) in which only what is bound below it appears -- the caches, the tree, named
    # paths. Credential files of every tool a user keeps there (~/.npmrc, ~/.config/pip/pip.conf,
    # ~/.cargo/credentials.toml ...) are then absent without a list (hostile pass of issue 36).
    veil = [(p, -1) for p in veiled()]
    ops = veil + [(p, 0) for p in rw] + [(p, 1) for p in ro] + [(p, 2) for p in hide]
    for p, kind in sorted(set(ops), key=lambda o: (len(o[0].parts), o[1], str(o[0]))):
        if kind == -1:
            if home is not None:
                own = Path(home) / hashlib.sha256(str(p).encode()).hexdigest()[:12]  # the same in every process
                own.mkdir(parents=True, exist_ok=True)
                out += ["--bind", str(own), str(p)]
            else:
                out += ["--tmpfs", str(p)]
        elif kind == 0:
            out += ["--bind", str(p), str(p)]
        elif kind == 1:
            out += ["--ro-bind", str(p), str(p)]
        elif p.is_dir() and not p.is_symlink():
            out += ["--tmpfs", str(p)]
            remount += ["--remount-ro", str(p)]
        else:
            out += ["--ro-bind", _empty_file(), str(p)]
    out += remount
    if bridge is not None and network == "loopback":
        # the bridge directory, writable, in the private /tmp; the wrapper listens there and execs argv
        out += ["--bind", str(bridge.dir), BRIDGE_DIR]
        argv = [_launcher_python(), "-I", "-S", "-c", _INSIDE, f"{BRIDGE_DIR}/{ServerBridge.SOCKET}", str(bridge.port),
                str(launch.fd if launch is not None else -1), *argv]
    elif launch is not None:
        argv = [_launcher_python(), "-I", "-S", "-c", _LAUNCH, str(launch.fd), *argv]
    env = dict(env)
    tmp = env.get("TMPDIR")
    if not tmp or not _under(Path(tmp).resolve(), rw) or _under(Path(tmp).resolve(), hide):
        env["TMPDIR"] = "/tmp"
    if cwd is not None:
        out += ["--chdir", str(Path(cwd).resolve())]
    return out + ["--", *argv], env


# --------------------------------------------------------------------------- the server's bridge

_INSIDE = r"""
import os, socket, sys, threading
path, port, fd, argv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
if fd >= 0:
    os.write(fd, b"S")
    os.set_inheritable(fd, False)
lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    os.unlink(path)
except FileNotFoundError:
    pass
lst.bind(path)
lst.listen(128)
if os.fork():
    os.wait()
    lst.close()
    raw = open("/proc/self/environ", "rb").read().split(b"\0")
    env = dict(v.split(b"=", 1) for v in raw if b"=" in v)
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as e:
        if fd >= 0:
            os.write(fd, b"E%d %s" % (e.errno, (e.strerror or "").encode()))
        os._exit(126 if e.errno in (13, 8) else 127)
if fd >= 0:
    os.close(fd)
if os.fork():
    os._exit(0)
fd = os.open(os.devnull, os.O_RDWR)
for i in (0, 1):
    os.dup2(fd, i)
def pump(a, b):
    try:
        while True:
            d = a.recv(262144)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
def serve(c):
    u = None
    for host in ("127.0.0.1", "::1"):
        try:
            u = socket.create_connection((host, port), timeout=10)
            break
        except OSError:
            pass
    if u is None:
        c.close()
        return
    u.settimeout(None)
    u.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t = threading.Thread(target=pump, args=(c, u), daemon=True)
    t.start()
    pump(u, c)
    t.join()
    c.close()
    u.close()
while True:
    c = lst.accept()[0]
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""
"""The wrapper a server candidate starts with (``python -I -S -c``, the bot's interpreter, no site
packages): it reports on the launch pipe (:class:`Launch`, fd -1 for none) that the sandbox is
set up, listens on the bridge's Unix socket, forks the forwarder (socket -> 127.0.0.1:PORT
of the sandbox's ``lo``, else ``[::1]:PORT``; a child of the sandbox's init, killed with the
namespace) and execs the server. Its own code, no import of the bot: a candidate's
``PYTHONPATH`` or site directory changes nothing (``-I -S``)."""


def _pump(a: socket.socket, b: socket.socket) -> None:
    try:
        while True:
            data = a.recv(262144)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass


class ServerBridge:
    """The bot's end of a server candidate's way out of its network namespace.

    Listens on the host's ``127.0.0.1:port`` (a free port, chosen here) in a thread of the bot; each
    connection is joined to a new connection to the Unix socket ``dir/server.sock``, which the
    wrapper inside the sandbox (:data:`_INSIDE`) serves. ``dir`` is a new private directory, hidden
    from every other candidate (:func:`protect`). The socket is opened without following a
    symbolic link (``O_PATH|O_NOFOLLOW``, then connected through ``/proc/self/fd``) and must be a
    socket: a candidate cannot point the bot at another socket of the host. When the socket
    cannot be reached (the forwarder died, the server is not up yet) the bot's connection is
    closed: the client sees a connection error, the runner's health wait goes on, a reproducer's
    request fails as server trouble. :meth:`close` stops it (idempotent). A context manager."""

    SOCKET = "server.sock"

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="bisectbot-net-")).resolve()
        protect(self.dir)
        self.socket_path = self.dir / self.SOCKET
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port: int = int(self._listener.getsockname()[1])
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name=f"bisectbot-bridge-{self.port}", daemon=True).start()

    def __enter__(self) -> ServerBridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self._listener.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _connect(self) -> socket.socket | None:
        try:
            fd = os.open(self.socket_path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                raise OSError("not a socket")
            u.settimeout(10)
            u.connect(f"/proc/self/fd/{fd}")
            u.settimeout(None)
            return u
        except OSError:
            u.close()
            return None
        finally:
            os.close(fd)

    def _serve(self, c: socket.socket) -> None:
        u = self._connect()
        if u is None:
            c.close()
            return
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            if self._closed:
                c.close()
                u.close()
                return
            self._conns.update((c, u))
        t = threading.Thread(target=_pump, args=(c, u), daemon=True)
        t.start()
        _pump(u, c)
        t.join()
        with self._lock:
            self._conns.difference_update((c, u))
        c.close()
        u.close()

    def close(self) -> None:
        """Stop listening, cut every open connection, remove the directory."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conns = list(self._conns)
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)
        with _lock:
            _hidden.discard(self.dir)
