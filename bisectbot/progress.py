"""Progress of long work: one line per phase of a probe, a heartbeat while a server loads, an ETA.

On MI355X one probe is 15-40 minutes (image pull, build, model load, requests); a 25 s build
printed nothing until its verdict (issue 24, input 7). Phases report here and the CLI decides
where lines go (:func:`enable`: stderr for ``run`` and ``round probe``; nothing when disabled,
e.g. in library use and ``-q``):

* :func:`phase` -- ``probe <label>: build ...`` when it starts, ``... build done in 25.1 s`` (or
  ``failed after``) when it ends, each line with the probe's elapsed time;
* :func:`heartbeat` -- ``server start: waiting for /health, 60 s`` at most every
  :data:`HEARTBEAT_S` seconds (a 754B model loads for 10-40 minutes);
* :func:`request` -- one line per reproducer request (requested and measured prompt tokens, outcome, seconds);
* :class:`Eta` -- after the first fresh probe, the mean fresh probe time times the probes left.

In GitHub Actions (``$GITHUB_STEP_SUMMARY``) :func:`summary` rewrites the step summary with the
search's progress after each probe; the final report's summary is appended after it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator

#: Seconds between two heartbeat lines of one wait (a server loading its model).
HEARTBEAT_S = 30.0

_sink: Callable[[str], None] | None = None
_local = threading.local()
_lock = threading.Lock()


def enable(echo: Callable[[str], None] | None) -> None:
    """Send progress lines to ``echo`` (None: drop them)."""
    global _sink
    _sink = echo


def emit(line: str) -> None:
    """One progress line (dropped when disabled). Thread-safe."""
    sink = _sink
    if sink is None:
        return
    with _lock:
        sink(line)


def fmt_s(seconds: float) -> str:
    """``25.1 s``, ``4m05s``, ``1h02m``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    m, s = divmod(int(seconds), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


@contextlib.contextmanager
def probe(label: str) -> Iterator[None]:
    """Name the probe this thread works on (its phases' lines carry it and its elapsed time)."""
    prev = getattr(_local, "probe", None)
    _local.probe = (label, time.monotonic())
    try:
        yield
    finally:
        _local.probe = prev


def _prefix() -> str:
    p = getattr(_local, "probe", None)
    if not p:
        return ""
    return f"probe {p[0]} [{fmt_s(time.monotonic() - p[1])}]: "


def note(text: str) -> None:
    """One line about the probe this thread works on (its label and elapsed time first)."""
    emit(f"{_prefix()}{text}")


@contextlib.contextmanager
def phase(name: str, detail: str = "") -> Iterator[None]:
    """A phase (``pull``, ``build``, ``server start``, ``requests``): a line when it starts and one
    with its duration when it ends or fails."""
    t0 = time.monotonic()
    emit(f"{_prefix()}{name}{' ' + detail if detail else ''} ...")
    try:
        yield
    except BaseException:
        emit(f"{_prefix()}{name} failed after {fmt_s(time.monotonic() - t0)}")
        raise
    emit(f"{_prefix()}{name} done in {fmt_s(time.monotonic() - t0)}")


class Heartbeat:
    """Call :meth:`beat` in a wait loop: a line at most every :data:`HEARTBEAT_S` seconds."""

    def __init__(self, what: str, every_s: float | None = None):
        self.what = what
        self.every_s = HEARTBEAT_S if every_s is None else every_s
        self.t0 = self.last = time.monotonic()

    def beat(self, note: str = "") -> None:
        now = time.monotonic()
        if now - self.last >= self.every_s:
            self.last = now
            emit(f"{_prefix()}{self.what}, {fmt_s(now - self.t0)}{'; ' + note if note else ''}")


def heartbeat(what: str, every_s: float | None = None) -> Heartbeat:
    """A :class:`Heartbeat` for one wait (e.g. ``waiting for /health``)."""
    return Heartbeat(what, every_s)


def request(size: int, outcome: str, seconds: float, measured: int | None = None, counted_by: str = "") -> None:
    """One reproducer request: ``size`` the requested prompt tokens, ``measured`` the server's count
    (tokens; None when unknown) and ``counted_by`` where that count comes from (``usage.prompt_tokens``,
    ``/tokenize``), its outcome, its duration in seconds:
    ``requested 1038 tokens, measured 1021 (usage.prompt_tokens): GARBAGE (0.1 s)`` (issue 23)."""
    if measured is not None and counted_by and counted_by != "requested":
        what = f"requested {size} tokens, measured {measured} ({counted_by})"
    else:
        what = f"requested {size} tokens (not measured)"
    emit(f"{_prefix()}{what}: {outcome} ({fmt_s(seconds)})")


class Eta:
    """Measured fresh probe times (seconds) and what is left: ``text(steps_left)`` is ``""`` before
    the first fresh probe, else ``ETA ~25m (3 probes x 8m20s measured)``."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def add(self, seconds: float) -> None:
        self.times.append(seconds)

    def text(self, steps_left: int) -> str:
        if not self.times or steps_left <= 0:
            return ""
        mean = sum(self.times) / len(self.times)
        return f"ETA ~{fmt_s(mean * steps_left)} ({steps_left} probe{'' if steps_left == 1 else 's'} x {fmt_s(mean)} measured)"


def summary(lines: list[str]) -> None:
    """Rewrite ``$GITHUB_STEP_SUMMARY`` with the search's progress so far (GitHub Actions only)."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    from .sanitize import sanitize  # commit subjects and reasons are untrusted Markdown

    body = "### bisectbot: progress\n\n" + "\n".join(f"- {sanitize(ln, 400)}" for ln in lines[-50:]) + "\n\n"
    with contextlib.suppress(OSError):
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(body)
