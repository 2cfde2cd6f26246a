"""One cached virtual environment per release (issue 39, input 1): a release installed to be run.

:func:`release_env` makes ``<cache>/envs/<distribution>-<version>-<sha256[:16]>-py<X.Y>/``: a
virtual environment of the bot's Python with the release's wheel installed, and its
dependencies from the recipe's index. Installing runs no code of the candidate: only wheels are
installed (``uv pip install --no-build``: no source distribution is built, not even a dependency
given by URL -- ``Requires-Dist: x @ file:///...`` -- which pip builds even under
``--only-binary :all:``, so pip is never used; installing a wheel unpacks files, it runs nothing of
the package), so a release without a wheel, or a dependency without one, is a skip with uv's
reason. Everything the candidate then runs (its server, the reproducer's command) runs in the
sandbox, where the environment is read-only (it lies under the user's cache, which candidates see
read-only: :mod:`bisectbot.sandbox`).

An environment is used only when its marker file (:data:`COMPLETE`) names the wheel it holds: a
killed install is removed and made again. Concurrent probes of one release wait on a file lock.
The installer is ``uv`` (:func:`installer`: a dependency of the bot, its package's binary, else ``uv``
on ``PATH``): ``uv venv`` and ``uv pip install``, seconds instead of tens of seconds for a large
dependency set.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

from ..errors import BadInput

__all__ = ["COMPLETE", "EnvFailed", "env_bin", "release_env", "safe_name"]

#: The marker an environment holds once its install finished: the wheel's file name and sha256.
COMPLETE = ".bisectbot-complete"

#: Characters of an installer's output kept in a failure's reason (its end: where pip says why).
REASON_CHARS = 1500


class EnvFailed(Exception):
    """The release could not be installed (no wheel for this platform, a dependency without a
    wheel, an index that refuses): the candidate is untestable, a skip with this reason."""


def safe_name(text: str, limit: int) -> str:
    """``text`` as one file-name component: letters, digits and ``._-`` kept, anything else ``_``, cut at
    ``limit`` characters (release versions and distribution names in directory names)."""
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in text)[:limit]


def env_bin(env: Path) -> Path:
    """The environment's ``bin`` directory (``Scripts`` on Windows)."""
    return env / ("Scripts" if os.name == "nt" else "bin")


def activated(env: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The variables that run a candidate from the environment ``env``: its ``bin`` first on ``PATH``,
    ``VIRTUAL_ENV``; then ``extra`` (the caller's own variables win)."""
    path = os.pathsep.join([str(env_bin(env)), os.environ.get("PATH", os.defpath)])
    return {"PATH": path, "VIRTUAL_ENV": str(env), **(extra or {})}


@contextmanager
def _locked(path: Path):  # -> Iterator[None]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(argv: Sequence[str], timeout_s: float, what: str) -> None:
    from ..secrets import candidate_env, redact

    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL,
                           env={**candidate_env(), "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"})
    except subprocess.TimeoutExpired:
        raise EnvFailed(f"{what}: no result after {timeout_s:.0f} s") from None
    except OSError as e:
        raise EnvFailed(f"{what}: cannot run {argv[0]!r}: {e}") from None
    if p.returncode != 0:
        out = redact((p.stdout or "") + (p.stderr or "")).strip()
        raise EnvFailed(f"{what} failed (exit {p.returncode}): {out[-REASON_CHARS:]}")


def installer() -> str:
    """The ``uv`` executable (the ``uv`` package's binary, else ``uv`` on ``PATH``).

    Raises :class:`EnvFailed` when there is none (``pip install uv``): pip is no substitute (module doc)."""
    try:
        import uv  # type: ignore[import-not-found,import-untyped]

        return str(uv.find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise EnvFailed("uv is not installed (pip install uv): releases are installed with uv, which builds no "
                    "source distribution; pip would build a dependency given by URL outside the sandbox")


def release_env(wheel: Path, sha256: str, dist: str, version: str, cache: Path, *, index_url: str | None,
                timeout_s: float) -> tuple[Path, bool]:
    """``(environment, made)``: the cached environment holding ``wheel`` (made now when ``made``).

    ``index_url``: where dependencies come from (the recipe's index; None: pip's default).
    ``timeout_s``: seconds for each installer step (the recipe's ``server.build_timeout_s``).
    ``sha256``: the wheel's content hash (64 hex digits): the environment's name holds it, so another
    file under the same name (a re-upload, another index) never reuses it.
    Raises :class:`EnvFailed` when the install fails, :class:`BadInput` for a file that is no wheel.
    """
    import re

    if not wheel.name.endswith(".whl"):
        raise BadInput(f"{wheel.name}: only a wheel is installed to be run (an sdist's build runs its code)")
    if not re.fullmatch(r"[0-9a-f]{64}", sha256 or ""):
        raise BadInput(f"{wheel.name}: {sha256!r} is not the SHA-256 of its content")
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    safe = safe_name(f"{dist}-{version}", 80)
    env = cache / "envs" / f"{safe}-{sha256[:24]}-py{py}"
    marker = f"{wheel.name} {sha256}\n"
    with _locked(env.with_name(env.name + ".lock")):
        done = env / COMPLETE
        if done.is_file() and done.read_text() == marker:
            return env, False
        shutil.rmtree(env, ignore_errors=True)  # a killed install, or another file under the same name
        uv = installer()
        python = env_bin(env) / "python"
        _run([uv, "venv", "--quiet", "--python", sys.executable, str(env)], timeout_s, "uv venv")
        install = [uv, "pip", "install", "--quiet", "--python", str(python), "--no-build"]
        install += (["--index-url", index_url] if index_url else []) + [str(wheel)]
        try:
            _run(install, timeout_s, f"installing {wheel.name}")
        except EnvFailed:
            shutil.rmtree(env, ignore_errors=True)
            raise
        done.write_text(marker)
        return env, True
