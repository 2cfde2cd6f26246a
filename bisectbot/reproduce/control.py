"""The decode control: is the decode path fine when the prefill threshold moved? (issue 18)

The motivating report separated prefill from decode with one control: a short prompt and a
long generation. Healthy greedy decoding also drifts into repetition over thousands of
tokens, so the control asks for output that can be checked exactly: with a document of
about ``prompt_tokens`` tokens (~1K, well below any prefill threshold), the question
``Count from 1 to N ...`` asks for ``N`` numbered lines; the reply is correct when the
integers it contains, from its first ``1`` on, are exactly ``1..N`` (a preface before the
list and text after it are allowed).

The control runs on the good end and on the first-bad candidate of a bisection (in the
same server session as their probes: one more request each). It is calibrated on the good
end: when the good end is not ``fine`` the control is ``unusable`` -- never ``broken``
(:func:`decode_path`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from ..recipe import ControlSpec
from .client import Client
from .prompts import PromptBuilder

#: Statuses of one control run.
STATUSES = ("fine", "broken", "error")
_INT_RE = re.compile(r"\d+")


def question(items: int) -> str:
    """The control's question for ``items`` numbered lines."""
    return (f"Count from 1 to {items}, writing each number on its own line followed by a period "
            "(1. 2. 3. and so on), and nothing else.")


@dataclass
class ControlResult:
    """One decode-control run.

    ``status``: ``fine`` (exactly ``items`` correct numbers), ``broken`` (a wrong, missing or
    cut-off item; ``first_wrong`` is its 1-based index, ``got`` what stood there), ``error``
    (the request failed; ``error`` says why: not a verdict). ``correct`` counts leading
    correct items; ``prompt_tokens``/``completion_tokens`` are the server's counts.
    """

    status: str
    items: int
    correct: int = 0
    first_wrong: int | None = None
    got: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    seconds: float = 0.0
    error: str | None = None

    def line(self) -> str:
        """One line: ``fine (500/500 items exact, 1012 tokens generated)`` or what broke."""
        gen = f", {self.completion_tokens} tokens generated" if self.completion_tokens else ""
        if self.status == "fine":
            return f"fine ({self.correct}/{self.items} items exact{gen})"
        if self.status == "error":
            return f"error ({self.error})"
        where = (f"item {self.first_wrong} reads {self.got!r}" if self.got is not None
                 else f"the list stops after item {self.correct}")
        cut = " (cut by max_tokens)" if self.finish_reason == "length" else ""
        return f"broken ({where}, {self.correct}/{self.items} items exact{gen}){cut}"

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "items": self.items, "correct": self.correct, "first_wrong": self.first_wrong,
                "got": self.got, "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "finish_reason": self.finish_reason, "seconds": round(self.seconds, 3), "error": self.error,
                "line": self.line()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ControlResult:
        return cls(status=d["status"], items=int(d["items"]), correct=int(d.get("correct") or 0),
                   first_wrong=d.get("first_wrong"), got=d.get("got"), prompt_tokens=d.get("prompt_tokens"),
                   completion_tokens=d.get("completion_tokens"), finish_reason=d.get("finish_reason"),
                   seconds=float(d.get("seconds") or 0.0), error=d.get("error"))


def check(content: str, items: int) -> tuple[int, int | None, str | None]:
    """(correct leading items, 1-based index of the first wrong one or None, what stood there).
    Numbers are read from the first ``1`` on; a list that stops early has no ``got``."""
    nums = _INT_RE.findall(content)
    try:
        start = nums.index("1")
    except ValueError:
        return 0, 1, (nums[0] if nums else None)
    seq = nums[start:start + items]
    for k, n in enumerate(seq, 1):
        if n != str(k):
            return k - 1, k, n
    if len(seq) < items:
        return len(seq), len(seq) + 1, None
    return items, None, None


def run_control(client: Client, spec: ControlSpec, seed: int = 0) -> ControlResult:
    """Run the decode control once on the server of ``client``; never raises for server trouble."""
    t0 = time.monotonic()
    max_tokens = spec.max_tokens or 4 * spec.items + 64
    try:
        builder = PromptBuilder(question(spec.items), needles=0, seed=seed + 7919, tokenize=client.tokenize)
        prompt = builder.build(spec.prompt_tokens)
        reply = client.chat(prompt.messages, max_tokens=max_tokens, temperature=0.0, seed=seed)
    except Exception as e:  # noqa: BLE001 - a control must never end a run with a traceback
        return ControlResult("error", spec.items, error=f"{type(e).__name__}: {e}"[:300],
                             seconds=time.monotonic() - t0)
    if reply.error:
        return ControlResult("error", spec.items, error=reply.error, seconds=time.monotonic() - t0)
    correct, first_wrong, got = check(reply.content or reply.reasoning, spec.items)
    return ControlResult("fine" if first_wrong is None else "broken", spec.items, correct, first_wrong, got,
                         reply.prompt_tokens, reply.completion_tokens, reply.finish_reason,
                         time.monotonic() - t0)


def decode_path(first_bad: ControlResult | None, good: ControlResult | None) -> tuple[str, str]:
    """The report's verdict on the decode path: ``(status, line)`` with status ``fine``,
    ``broken``, ``unusable`` (the good end is not fine: the control cannot tell), ``error`` or
    ``not run``. Without a good-end run the line says the control is uncalibrated."""
    if first_bad is None:
        return "not run", "decode path: not run"
    if good is not None and good.status != "fine":
        return "unusable", f"decode path: control unusable (the good end reads {good.line()})"
    if first_bad.status == "error":
        return "error", f"decode path: control failed on the first bad ({first_bad.error})"
    tail = "" if good is not None else " (uncalibrated: no good end checked)"
    return first_bad.status, f"decode path: {first_bad.line()}{tail}"


__all__ = ["ControlResult", "check", "decode_path", "question", "run_control"]


def control_pair(endpoint: str, good_url: str | None, spec: Any, model: str | None = None,
                 api_key: str | None = None, timeout_s: float = 600.0,
                 log: Any = None) -> dict[str, Any]:
    """Run the control on ``good_url`` (the calibration, when given) and on ``endpoint``;
    returns ``{"control": {"candidate": ..., "good": ...}, "decode_path": {"status", "line"}}``.
    ``spec`` is a :class:`bisectbot.recipe.ReproducerSpec` with ``control`` set."""
    cs = spec.control or ControlSpec()
    say = log or (lambda _m: None)
    good = None
    if good_url:
        good = run_control(Client(good_url, model=getattr(spec.reference, "model", None), timeout_s=timeout_s), cs,
                           spec.seed)
        say(f"decode control on the good end: {good.line()}")
    cand = run_control(Client(endpoint, model=model, timeout_s=timeout_s, api_key=api_key), cs, spec.seed)
    say(f"decode control on the candidate: {cand.line()}")
    status, line = decode_path(cand, good)
    return {"control": {"candidate": cand.to_dict(), "good": good.to_dict() if good else None},
            "decode_path": {"status": status, "line": line}}
