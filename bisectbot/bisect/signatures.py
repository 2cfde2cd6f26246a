"""Failure signatures: what a bad probe looked like, so that a later bad probe of a
different failure is told apart (a ``skip``, not evidence)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Signature:
    """What a bad probe looked like; a later bad that does not match is ``skip``.

    ``kind``: ``garbage``, ``all-garbage``, ``error``, ``fixed`` (fix bisection), ``exit``
    (command), ``patch``. ``threshold``: first bad prompt size in **tokens** (None when
    not measured). ``detail``: exit code, patch state, reasons (for humans; compared only
    for ``exit`` and ``patch``).
    """

    kind: str
    threshold: int | None = None
    detail: str = ""

    def same_failure(self, other: Signature) -> bool:
        """Same kind and, for ``exit``/``patch``, the same exit code/state; thresholds are not
        compared (a moved threshold is drift of the same failure, issue 12).

        A threshold search of a command reproducer (kind ``garbage``/``all-garbage``) names
        how its runs failed in ``detail`` (``exit 1``, ``crash (SIGSEGV)``, ``timeout after
        2 s``; :func:`command_failures`): when both signatures name such failures and none is
        shared, they are different failures (an out-of-memory exit 3 or a segfault above 16K
        tokens on older commits is not the bad end's exit 1 above 8K; before, it was taken
        for the bug and named a wrong culprit, verified). Classifier reasons of a prefill
        reproducer are not compared (garbage varies in kind from reply to reply).
        """
        if self.kind != other.kind:
            return False
        if self.kind in ("exit", "patch"):
            return self.detail == other.detail
        mine, theirs = command_failures(self.detail), command_failures(other.detail)
        return not (mine and theirs and not mine & theirs)

    def matches(self, other: Signature, band: float = 2.0) -> bool:
        """:meth:`same_failure` and thresholds within a factor ``band`` of each other."""
        if not self.same_failure(other):
            return False
        if self.threshold and other.threshold:
            hi, lo = max(self.threshold, other.threshold), min(self.threshold, other.threshold)
            return hi <= lo * band
        return True

    def __str__(self) -> str:
        s = self.kind
        if self.threshold is not None:
            s += f"@{self.threshold}"
        if self.detail:
            s += f" ({self.detail})"
        return s

    _RE = re.compile(r"^(?P<kind>[\w-]+)(?:@(?P<thr>\d+))?(?: \((?P<detail>.*)\))?$")

    @classmethod
    def parse(cls, s: str) -> Signature | None:
        """Inverse of ``str()``; None for an empty string."""
        s = (s or "").strip()
        if not s:
            return None
        m = cls._RE.match(s)
        if not m:
            return cls(kind=s)
        thr = m.group("thr")
        return cls(m.group("kind"), int(thr) if thr else None, m.group("detail") or "")


_COMMAND_FAILURE = re.compile(r"\b(exit \d+\b|crash \([\w ]+\)|timeout\b)")


def command_failures(detail: str) -> frozenset[str]:
    """How the runs of a command reproducer failed, from a signature's ``detail`` (the reasons
    of :func:`bisectbot.reproduce.command.command_outcome`): ``{"exit 1"}``,
    ``{"crash (SIGSEGV)"}``, ``{"timeout"}`` (durations dropped). Empty for classifier reasons."""
    return frozenset(_COMMAND_FAILURE.findall(detail or ""))
