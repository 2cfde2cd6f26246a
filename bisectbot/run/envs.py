"""One cached virtual environment per release (issue 39, input 1): a release installed to be run.

:func:`release_env` makes ``<cache>/envs/<distribution>-<version>-<sha256[:16]>-py<X.Y>/``: a
virtual environment of the bot's Python with the release's wheel installed, and its
dependencies from the recipe's index. Installing runs no code of the candidate: only wheels are
installed (``--only-binary :all:``; installing a wheel unpacks files, it runs nothing of the
package), so a release without a wheel, or a dependency without one, is a skip with pip's
reason. Everything the candidate then runs (its server, the reproducer's command) runs in the
sandbox, where the environment is read-only (it lies under the user's cache, which candidates see
read-only: :mod:`bisectbot.sandbox`).

An environment is used only when its marker file (:data:`COMPLETE`) names the wheel it holds: a
killed install is removed and made again. Concurrent probes of one release wait on a file lock.
The installer (:func:`installer`) is ``uv`` when it is installed (its Python package beside the
bot, or on ``PATH``: ``uv venv``, ``uv pip install``, seconds instead of tens of seconds for a large
dependency set), else the standard library's ``venv`` (without pip) and the bot's own
``pip --python``.
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

__all__ = ["COMPLETE", "EnvFailed", "env_bin", "release_env"]

#: The marker an environment holds once its install finished: the wheel's file name and sha256.
COMPLETE = ".bisectbot-complete"

#: Characters of an installer's output kept in a failure's reason (its end: where pip says why).
REASON_CHARS = 1500


class EnvFailed(Exception):
    """The release could not be installed (no wheel for this platform, a dependency without a
    wheel, an index that refuses): the candidate is untestable, a skip with this reason."""


def env_bin(env: Path) -> Path:
    """The environment's ``bin`` directory (``Scripts`` on Windows)."""
    return env / ("Scripts" if os.name == "nt" else "bin")


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


def installer() -> str | None:
    """The ``uv`` executable when there is one (the ``uv`` package's binary, else ``uv`` on ``PATH``), or None."""
    try:
        import uv  # type: ignore[import-not-found,import-untyped]

        return str(uv.find_uv_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def release_env(wheel: Path, sha256: str, dist: str, version: str, cache: Path, *, index_url: str | None,
                timeout_s: float, uv: str | None = "auto") -> tuple[Path, bool]:
    """``(environment, made)``: the cached environment holding ``wheel`` (made now when ``made``).

    ``index_url``: where dependencies come from (the recipe's index; None: pip's default).
    ``timeout_s``: seconds for each installer step (the recipe's ``server.build_timeout_s``).
    ``uv``: the ``uv`` executable, ``"auto"`` (:func:`installer`) or None (``venv`` and pip).
    Raises :class:`EnvFailed` when the install fails, :class:`BadInput` for a file that is no wheel.
    """
    if not wheel.name.endswith(".whl"):
        raise BadInput(f"{wheel.name}: only a wheel is installed to be run (an sdist's build runs its code)")
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in f"{dist}-{version}")
    env = cache / "envs" / f"{safe}-{(sha256 or 'nosha')[:16]}-py{py}"
    marker = f"{wheel.name} {sha256}\n"
    with _locked(env.with_name(env.name + ".lock")):
        done = env / COMPLETE
        if done.is_file() and done.read_text() == marker:
            return env, False
        shutil.rmtree(env, ignore_errors=True)  # a killed install, or another file under the same name
        uv = installer() if uv == "auto" else uv
        python = env_bin(env) / "python"
        if uv:
            _run([uv, "venv", "--quiet", "--python", sys.executable, str(env)], timeout_s, "uv venv")
            install = [uv, "pip", "install", "--quiet", "--python", str(python)]
        else:
            _run([sys.executable, "-m", "venv", "--without-pip", str(env)], timeout_s, "python -m venv")
            install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
        install += ["--only-binary", ":all:"] + (["--index-url", index_url] if index_url else []) + [str(wheel)]
        try:
            _run(install, timeout_s, f"installing {wheel.name}")
        except EnvFailed:
            shutil.rmtree(env, ignore_errors=True)
            raise
        done.write_text(marker)
        return env, True
