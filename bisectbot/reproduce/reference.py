"""Comparison with a reference engine: the oracle for fluent-but-wrong output (issue 18).

A broken prefill path can produce fluent text about the wrong part of the context, or a
confidently wrong answer; no text statistic sees that. A known-good engine (the
bisection's last-good candidate on another GPU slot, or an external endpoint) answering
the same greedy prompt does. Every comparison is reported with its figure:

* **greedy continuation agreement**: the same prompt, temperature 0, the reproducer's
  seed, ``continuation_tokens`` tokens from both servers; :class:`Comparison` holds the
  first diverging token (0-based index, ``None`` when the texts agree) and the normalised
  token edit distance (Levenshtein over word/punctuation tokens divided by the longer
  length, 0..1, by ``rapidfuzz``).
* **prompt log-probabilities** (opt-in, ``prompt_logprobs``): vLLM's ``prompt_logprobs``
  extension returns, for every prompt position, ``{token_id: {"logprob", "rank",
  "decoded_token"}}`` (the first position ``None``); the figure is the mean and the largest
  absolute difference (nats) over the token ids both servers list. Only up to
  ``prompt_logprobs_max_size`` prompt tokens: vLLM materialises prompt logits for every
  position, a known memory risk at long prompts.

**Noise calibration** (:func:`calibrate`): different healthy builds differ numerically
and the difference grows with prompt length, so the tolerance is measured between two
*different* good builds at several sizes up to the maximum (:class:`Noise`). A candidate
diverges only beyond ``margin`` times the measured noise at the nearest calibrated size
at or above its size (the largest measured noise beyond the largest), and never below the
floors (``edit_distance_floor``, ``logprob_floor``) -- see :meth:`Noise.tolerance`.

:class:`ReferenceProbe` wraps the threshold search's HTTP probe: each size is classified
as before and compared with the reference; with regress ``diverges`` a divergence is the
bad outcome (``GARBAGE`` in the size table, reason ``diverges from the reference: ...``).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests
from rapidfuzz.distance import Levenshtein

from .. import jsonio as _jsonio
from ..models import Outcome, PromptKey
from ..recipe import ReferenceSpec, ReproducerSpec
from .client import BadReply, Client, cold_fields, parse_chat, sampling_fields
from .prompts import PromptBuilder
from .search import SizeResult, ThresholdResult
from .threshold import HttpProbe, search_threshold

_TOKEN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)
#: Calibration sizes when the recipe names none: this many, log-spaced from min to max size.
DEFAULT_CALIBRATION_POINTS = 4


#: Largest noise (normalised edit distance, 0..1) between two good builds at one size that a
#: calibration accepts (issue 23): beyond it the two replies share less than half their words,
#: which two healthy builds of one model do not -- one of them answers garbage, or is another
#: model -- and a tolerance of margin x that noise would switch the comparison off.
NOISE_CEILING = 0.5
#: Hint of a "reference unusable" reason whose continuation was compared as text.
LOGPROBS_HINT = ("compare prompt log-probabilities instead (--prompt-logprobs, reference.prompt_logprobs), "
                 "where the servers offer vLLM's prompt_logprobs")

CONTINUATION_CHARS = 400
"""Characters of each greedy continuation kept in a size's evidence (the report shows both)."""


def text_tokens(text: str) -> list[str]:
    """Word and punctuation tokens of ``text`` (server-independent; the unit of the figures)."""
    return _TOKEN_RE.findall(text)


@dataclass
class Continuation:
    """One greedy reply: ``text``, the server's ``prompt_tokens``, ``prompt_logprobs`` (vLLM
    shape, ``None`` when not asked or not offered); ``error`` (one line) when it failed,
    ``error_kind`` as :class:`bisectbot.reproduce.client.Reply`'s."""

    text: str = ""
    prompt_tokens: int | None = None
    prompt_logprobs: list[Any] | None = None
    error: str | None = None
    error_kind: str | None = None
    seconds: float = 0.0
    finish_reason: str | None = None
    reply: Any = None  # the parsed :class:`bisectbot.reproduce.client.Reply` (classified, issue 23)


def reply_text(content: str, reasoning: str) -> str:
    """The generated text compared: reasoning first, then the answer (the order a model emits them)."""
    return "\n".join(t for t in (reasoning, content) if t)


def greedy(client: Client, messages: list[dict[str, Any]], tokens: int, seed: int,
           prompt_logprobs: bool = False) -> Continuation:
    """``POST /v1/chat/completions`` with temperature 0, ``seed``, ``max_tokens=tokens`` and, when
    ``prompt_logprobs``, vLLM's ``prompt_logprobs: 0``. Never raises for server trouble.

    The request goes through the client's bounded layer (:func:`bisectbot.bounded.request`,
    issue 23): ``client.timeout_s`` bounds the whole exchange (a reference dribbling its reply
    is cut off there) and the body is capped at :data:`bisectbot.bounded.MAX_BODY_BYTES`."""
    from .. import bounded

    body: dict[str, Any] = {"model": client.model_name(), "messages": messages, "max_tokens": tokens,
                            **sampling_fields(0.0, seed)}  # pinned as the probe's own requests (issue 37)
    if prompt_logprobs:
        body["prompt_logprobs"] = 0
    if client.cold:
        body.update(cold_fields())  # its own cache_salt: a cold prefill on both servers (issue 22)
    t0 = time.monotonic()
    try:
        r = client._request("POST", "/v1/chat/completions", timeout=client.timeout_s, json=body)
    except requests.exceptions.Timeout:
        return Continuation(error=f"{client.base_url}: no complete reply within {client.timeout_s:g} s",
                            error_kind="timeout", seconds=time.monotonic() - t0)
    except bounded.BodyTooLarge as e:
        return Continuation(error=f"{client.base_url}: {' '.join(str(e).split())[:200]}", error_kind="bad-response",
                            seconds=time.monotonic() - t0)
    except requests.RequestException as e:
        return Continuation(error=f"{client.base_url}: {' '.join(str(e).split())[:200]}", error_kind="connection",
                            seconds=time.monotonic() - t0)
    dt = time.monotonic() - t0
    if r.status_code != 200:
        kind = "over-limit" if r.status_code == 400 and "context length" in r.text else "http"
        return Continuation(error=f"{client.base_url}: HTTP {r.status_code}: {' '.join(r.text.split())[:200]}",
                            error_kind=kind, seconds=dt)
    try:
        data = _jsonio.loads(r.content)
        reply = parse_chat(data, dt)
    except (ValueError, BadReply) as e:
        return Continuation(error=f"{client.base_url}: unexpected reply: {e}"[:300], error_kind="bad-response",
                            seconds=dt)
    lps = data.get("prompt_logprobs") if prompt_logprobs else None
    if lps is not None and not isinstance(lps, list):
        lps = None
    return Continuation(text=reply_text(reply.content, reply.reasoning), prompt_tokens=reply.prompt_tokens,
                        prompt_logprobs=lps, seconds=dt, finish_reason=reply.finish_reason, reply=reply)


@dataclass
class Comparison:
    """Figures of one candidate-vs-reference comparison at one prompt.

    ``first_divergence``: index of the first differing token (``None``: identical);
    ``edit_distance``: normalised token edit distance 0..1; ``tokens``: tokens compared
    (the longer side); ``logprob_mean``/``logprob_max``: absolute difference of prompt
    log-probabilities (nats) over ``logprob_positions`` shared entries (``None`` when not
    compared)."""

    first_divergence: int | None
    edit_distance: float
    tokens: int
    logprob_mean: float | None = None
    logprob_max: float | None = None
    logprob_positions: int = 0
    #: the worst :data:`LOGPROB_WINDOW` consecutive positions: their mean |Δ| (nats) and first position
    logprob_window: float | None = None
    logprob_window_at: int | None = None
    candidate_text: str = ""
    reference_text: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"first_divergence": self.first_divergence,
                             "edit_distance": round(self.edit_distance, 4), "tokens": self.tokens}
        if self.logprob_mean is not None:
            d.update(logprob_mean=round(self.logprob_mean, 5), logprob_max=round(self.logprob_max or 0.0, 5),
                     logprob_positions=self.logprob_positions,
                     logprob_window=round(self.logprob_window or 0.0, 5), logprob_window_at=self.logprob_window_at)
        return d

    def figure(self) -> str:
        """One line: ``first diverging word 3 of 32, edit distance 0.81; prompt logprobs |Δ| mean 0.0021``.
        The position counts words and punctuation (:func:`text_tokens`), not the server's model tokens
        (issue 23): the unit is said."""
        head = ("identical continuation" if self.first_divergence is None
                else f"first diverging word {self.first_divergence} of {self.tokens} (words and punctuation)")
        s = f"{head}, edit distance {self.edit_distance:.3f}"
        if self.logprob_mean is not None:
            s += (f"; prompt logprobs |Δ| mean {self.logprob_mean:.4f} max {self.logprob_max:.4f} nats over "
                  f"{self.logprob_positions} positions, worst {LOGPROB_WINDOW}-position window "
                  f"{self.logprob_window or 0.0:.4f} from position {self.logprob_window_at}")
        return s


#: Prompt positions of the window whose mean |Δ| of prompt log-probabilities is judged (issue 37,
#: input 5: a bug touching the prompt's tail reads a tiny mean over the whole prompt). A kernel bug
#: touches whole tiles of query rows, and no tile is shorter than 16 rows: Triton's ``tl.dot`` needs
#: every block dimension >= 16, and the attention kernels of vLLM and aiter tile queries by 16-128.
#: A shorter window would only add noise; a longer one dilutes a one-tile bug.
LOGPROB_WINDOW = 16


def _position_diffs(a: list[Any], b: list[Any]) -> list[float | None]:
    """Per prompt position, the mean |Δ| (nats) over the token ids both servers list there
    (``None`` where they share none)."""
    out: list[float | None] = []
    for x, y in zip(a, b):
        if not isinstance(x, dict) or not isinstance(y, dict):
            out.append(None)
            continue
        diffs = _entry_diffs(x, y)
        out.append(math.fsum(diffs) / len(diffs) if diffs else None)
    return out


def _entry_diffs(x: dict[Any, Any], y: dict[Any, Any]) -> list[float]:
    """|Δ| log-probability (nats) of each token id both positions' entries carry (a number, or a dict
    with ``logprob``); non-finite or missing values are left out."""
    diffs: list[float] = []
    for tid in x.keys() & y.keys():
        lx, ly = x[tid], y[tid]
        vx = lx.get("logprob") if isinstance(lx, dict) else lx
        vy = ly.get("logprob") if isinstance(ly, dict) else ly
        if isinstance(vx, (int, float)) and isinstance(vy, (int, float)) and math.isfinite(vx) \
                and math.isfinite(vy):
            diffs.append(abs(float(vx) - float(vy)))
    return diffs


def worst_window(per_position: list[float | None], width: int = LOGPROB_WINDOW) -> tuple[float, int] | None:
    """``(mean, start)``: the largest mean |Δ| over ``width`` consecutive compared positions and the
    prompt position where that window starts (the whole series when shorter); ``None`` when empty."""
    pts = [(i, v) for i, v in enumerate(per_position) if v is not None]
    if not pts:
        return None
    w = min(width, len(pts))
    run = math.fsum(v for _, v in pts[:w])
    best, at = run, pts[0][0]
    for k in range(w, len(pts)):
        run += pts[k][1] - pts[k - w][1]
        if run > best:
            best, at = run, pts[k - w + 1][0]
    return best / w, at


def _logprob_diff(a: list[Any], b: list[Any]) -> tuple[float, float, int, float, int] | None:
    """``(mean, max, entries, worst window mean, its start position)`` of |Δ| prompt log-probabilities."""
    diffs: list[float] = []
    for x, y in zip(a, b):
        if not isinstance(x, dict) or not isinstance(y, dict):
            continue
        diffs += _entry_diffs(x, y)
    win = worst_window(_position_diffs(a, b))
    if not diffs or win is None:
        return None
    return math.fsum(diffs) / len(diffs), max(diffs), len(diffs), win[0], win[1]


def compare(candidate: Continuation, reference: Continuation, tokens: int | None = None) -> Comparison:
    """Figures of ``candidate`` against ``reference`` (first ``tokens`` text tokens of each; all
    when ``None``). Both must have succeeded."""
    a, b = text_tokens(candidate.text), text_tokens(reference.text)
    if tokens is not None:
        a, b = a[:tokens], b[:tokens]
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if first is None and len(a) != len(b):
        first = min(len(a), len(b))
    dist = Levenshtein.normalized_distance(a, b) if (a or b) else 0.0
    cmp = Comparison(first, float(dist), max(len(a), len(b)), candidate_text=candidate.text,
                     reference_text=reference.text)
    if candidate.prompt_logprobs is not None and reference.prompt_logprobs is not None:
        got = _logprob_diff(candidate.prompt_logprobs, reference.prompt_logprobs)
        if got is not None:
            (cmp.logprob_mean, cmp.logprob_max, cmp.logprob_positions, cmp.logprob_window,
             cmp.logprob_window_at) = got
    return cmp


@dataclass
class Tolerance:
    """Divergence thresholds at one size: ``edit_distance`` (0..1), ``logprob`` (nats, mean over the
    prompt) and ``logprob_window`` (nats, the worst :data:`LOGPROB_WINDOW` positions; issue 37)."""

    edit_distance: float
    logprob: float
    calibrated_at: int | None = None
    logprob_window: float = math.inf

    def judge(self, cmp: Comparison) -> list[str]:
        """Reasons ``cmp`` diverges beyond this tolerance (empty: within)."""
        out = []
        if cmp.edit_distance > self.edit_distance:
            out.append(f"edit distance {cmp.edit_distance:.3f} > tolerance {self.edit_distance:.3f}")
        if cmp.logprob_mean is not None and cmp.logprob_mean > self.logprob:
            out.append(f"prompt logprobs |Δ| mean {cmp.logprob_mean:.4f} > tolerance {self.logprob:.4f} nats")
        if cmp.logprob_window is not None and cmp.logprob_window > self.logprob_window:
            out.append(f"prompt logprobs |Δ| worst {LOGPROB_WINDOW}-position window {cmp.logprob_window:.4f} (from "
                       f"position {cmp.logprob_window_at}) > tolerance {self.logprob_window:.4f} nats")
        return out


@dataclass
class Noise:
    """Measured noise between two different good builds: per calibrated size (prompt tokens),
    the largest edit distance and the largest mean prompt-logprob difference (nats; ``None``
    when not measured). ``between`` names the two builds; ``notes`` what went wrong."""

    between: str = ""
    edit: dict[int, float] = field(default_factory=dict)
    logprob: dict[int, float | None] = field(default_factory=dict)
    #: per calibrated size, the worst-window mean |Δ| (nats) between the two good builds (issue 37)
    logprob_window: dict[int, float | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: why the measured noise was not used (above :data:`NOISE_CEILING`); the floors apply then
    unusable: str = ""

    def check_ceiling(self) -> None:
        """Reject a measured noise above :data:`NOISE_CEILING` at any size (issue 23): the
        calibration is "unusable", said in :attr:`notes`, and the floors apply."""
        over = {k: v for k, v in self.edit.items() if v > NOISE_CEILING}
        if not over:
            return
        at = ", ".join(f"{v:.3f} at {k}" for k, v in sorted(over.items()))
        self.unusable = (f"calibration unusable: edit distance {at} tokens between {self.between or 'the two builds'} "
                         f"is above the ceiling {NOISE_CEILING:g} (one of them is not a healthy build of the model); "
                         "the floors apply")
        self.notes.append(self.unusable)
        self.edit, self.logprob, self.logprob_window = {}, {}, {}

    @property
    def calibrated(self) -> bool:
        return bool(self.edit)

    def tolerance(self, size: int, spec: ReferenceSpec) -> Tolerance:
        """Thresholds at ``size`` tokens: ``max(floor, margin x noise)``, the noise taken at the
        nearest calibrated size at or above ``size`` (beyond the largest: the largest noise seen)."""
        if not self.edit:
            return Tolerance(spec.edit_distance_floor, spec.logprob_floor, None, spec.logprob_window_floor)
        sizes = sorted(self.edit)
        at = next((s for s in sizes if s >= size), None)
        if at is None:
            e = max(self.edit.values())
            lps = [v for v in self.logprob.values() if v is not None]
            wins = [v for v in self.logprob_window.values() if v is not None]
        else:
            e = max(v for s, v in self.edit.items() if s <= at)
            lps = [v for s, v in self.logprob.items() if s <= at and v is not None]
            wins = [v for s, v in self.logprob_window.items() if s <= at and v is not None]
        lp = max(lps) if lps else None
        win = max(wins) if wins else None
        return Tolerance(max(spec.edit_distance_floor, spec.margin * e),
                         max(spec.logprob_floor, spec.margin * (lp or 0.0)), at,
                         max(spec.logprob_window_floor, spec.margin * (win or 0.0)))

    def to_dict(self) -> dict[str, Any]:
        return {"between": self.between, "edit_distance": {str(k): round(v, 4) for k, v in sorted(self.edit.items())},
                "logprob": {str(k): (None if v is None else round(v, 5)) for k, v in sorted(self.logprob.items())},
                "logprob_window": {str(k): (None if v is None else round(v, 5))
                                   for k, v in sorted(self.logprob_window.items())},
                "notes": self.notes, "unusable": self.unusable}

    def table(self, spec: ReferenceSpec) -> list[str]:
        """Printable lines: size, measured noise, tolerance used."""
        lines = [f"noise calibration between {self.between or 'two good builds'} (margin {spec.margin:g}x):"]
        if not self.edit:
            return lines + [f"  not calibrated: floors edit distance {spec.edit_distance_floor:g}, "
                            f"prompt logprobs {spec.logprob_floor:g} nats"] + [f"  {n}" for n in self.notes]
        for s in sorted(self.edit):
            lp = self.logprob.get(s)
            t = self.tolerance(s, spec)
            lp_txt = "-" if lp is None else f"{lp:.4f}"
            lines.append(f"  {s:>7} tokens: edit distance {self.edit[s]:.3f}, prompt logprobs |Δ| {lp_txt} "
                         f"→ tolerance {t.edit_distance:.3f} / {t.logprob:.4f}")
        return lines + [f"  {n}" for n in self.notes]


def calibration_sizes(spec: ReproducerSpec, lo: int, hi: int) -> list[int]:
    """The reference spec's calibration sizes, else :data:`DEFAULT_CALIBRATION_POINTS` log-spaced
    sizes from ``lo`` to ``hi`` tokens (both included)."""
    ref = spec.reference
    if ref is not None and ref.calibration_sizes:
        return sorted({s for s in ref.calibration_sizes if s <= hi})
    n = DEFAULT_CALIBRATION_POINTS
    if hi <= lo:
        return [hi]
    return sorted({round(lo * (hi / lo) ** (i / (n - 1))) for i in range(n)})


def calibrate(a: Client, b: Client, spec: ReproducerSpec, sizes: list[int], between: str = "",
              log: Callable[[str], None] | None = None) -> Noise:
    """Measure the noise between two *different* good builds ``a`` and ``b`` at ``sizes`` prompt
    tokens (one prompt each, sized on ``a``). ``spec.reference`` must be set."""
    ref = spec.reference
    assert ref is not None
    say = log or (lambda _m: None)
    noise = Noise(between=between)
    builder = PromptBuilder(spec.question, needles=spec.needles, seed=spec.seed, tokenize=a.tokenize)
    for size in sizes:
        prompt = builder.build(size)
        lp = ref.prompt_logprobs and size <= ref.prompt_logprobs_max_size
        x = greedy(a, prompt.messages, ref.continuation_tokens, spec.seed, lp)
        y = greedy(b, prompt.messages, ref.continuation_tokens, spec.seed, lp)
        if x.error or y.error:
            noise.notes.append(f"calibration at {size} tokens failed: {x.error or y.error}")
            say(noise.notes[-1])
            continue
        if x.prompt_tokens:
            builder.calibrate(prompt, x.prompt_tokens)
        measured = x.prompt_tokens or size
        cmp = compare(x, y, ref.continuation_tokens)
        noise.edit[measured] = max(noise.edit.get(measured, 0.0), cmp.edit_distance)
        noise.logprob[measured] = cmp.logprob_mean
        noise.logprob_window[measured] = cmp.logprob_window
        say(f"calibration {measured} tokens: {cmp.figure()}")
    noise.check_ceiling()
    if noise.unusable:
        say(noise.unusable)
    return noise


class ReferenceProbe:
    """``probe(size) -> SizeResult`` for :func:`bisectbot.reproduce.search.search`: the HTTP
    probe's classification plus a comparison with the reference at the same prompt.

    ``diverges_bad``: divergence is the bad outcome (regress ``diverges``); ``garbage_bad``:
    so is the classifier's GARBAGE (regress ``garbage`` or ``garbage, diverges``). Evidence
    ``reference`` in each size's result holds the figures and the tolerance used.

    Cost per size: one greedy request of ``continuation_tokens`` tokens on the reference. The
    candidate's side reuses its classifier reply (greedy already: temperature 0, the same
    seed, ``max_tokens >= continuation_tokens``) -- no second long prefill on the candidate --
    compared over the reference's tokens (its last one dropped when it was cut by
    ``max_tokens``: it may end inside a word). Only a size compared with prompt logprobs (at
    most ``prompt_logprobs_max_size`` tokens, the cheap ones) or a sampling reproducer
    sends the candidate its own greedy request.
    """

    def __init__(self, inner: HttpProbe, reference: Client, spec: ReproducerSpec, noise: Noise,
                 diverges_bad: bool = True, garbage_bad: bool = True):
        assert spec.reference is not None
        self.inner = inner
        self.reference = reference
        self.spec = spec
        self.ref = spec.reference
        self.noise = noise
        self.diverges_bad = diverges_bad
        self.garbage_bad = garbage_bad
        self.notes = inner.notes
        self._messages: list[dict[str, Any]] | None = None
        self._reply: Any = None
        chat = inner._chat

        def recording(messages: list[dict[str, Any]], max_tokens: int) -> Any:
            self._messages = messages
            self._reply = None
            reply = chat(messages, max_tokens)
            self._reply = (reply, max_tokens)
            return reply

        inner._chat = recording  # type: ignore[method-assign]
        inner.report_progress = False  # the line names the outcome after the comparison (issue 37, input 9)

    def __call__(self, size: int) -> SizeResult:
        from .. import progress

        t0 = time.monotonic()
        res = self._compare(size, self.inner(size))
        ref = res.evidence.get("reference")
        if isinstance(ref, dict):
            ref["outcome"] = res.outcome.value  # what decided; text_outcome stays the classifier's own
        how = ""
        if isinstance(ref, dict) and ref.get("text_outcome") and ref["text_outcome"] != res.outcome.value:
            how = f" (text alone: {ref['text_outcome']}; reference comparison decides)"
        progress.request(size, res.outcome.value + how, time.monotonic() - t0, measured=res.prompt_tokens,
                         counted_by=res.counted_by)
        return res

    def confirm(self, size: int) -> SizeResult:
        """The inner probe's boundary confirmation (another prompt), compared as well; its progress line
        printed here (the outcome that decides)."""
        from .. import progress

        t0 = time.monotonic()
        res = self._compare(size, self.inner.confirm(size))
        progress.request(size, f"{res.outcome.value} (confirmation)", time.monotonic() - t0,
                         measured=res.prompt_tokens, counted_by=res.counted_by)
        return res

    def ask(self, key: PromptKey) -> SizeResult:
        """The inner probe's exact prompt ``key`` (issue 35), compared as well."""
        return self._compare(key.requested, self.inner.ask(key))

    def _compare(self, size: int, res: SizeResult) -> SizeResult:
        if res.outcome == Outcome.ERROR or self._messages is None \
                or res.evidence.get("prefix_cache", {}).get("served_from_cache"):
            return res  # a cached reply is not evidence: no comparison either (issue 22)
        measured = res.size
        lp = self.ref.prompt_logprobs and measured <= self.ref.prompt_logprobs_max_size
        k = self.ref.continuation_tokens
        reply, asked = self._reply if self._reply is not None else (None, 0)
        reuse = (not lp and self.spec.temperature == 0 and reply is not None and reply.ok and asked >= k)
        refr = greedy(self.reference, self._messages, k, self.spec.seed, lp)
        if reuse:
            cand = Continuation(text=reply_text(reply.content, reply.reasoning), prompt_tokens=reply.prompt_tokens)
            res.requests += 1
        else:
            cand = greedy(self.inner.client, self._messages, k, self.spec.seed, lp)
            res.requests += 2
        res.seconds += cand.seconds + refr.seconds
        for who, c in (("candidate", cand), ("reference", refr)):
            if c.error and who == "reference" and c.error_kind == "over-limit":
                return self._unusable(res, f"it cannot hold the prompt of {measured} tokens ({c.error[:200]})", lp)
            if c.error:
                return SizeResult(size, res.prompt_tokens, Outcome.ERROR,
                                  [f"greedy comparison failed on the {who}: {c.error}"], 1.0, res.votes, res.requests,
                                  res.seconds, res.excerpt, error_kind=c.error_kind or "http",
                                  evidence={**res.evidence, "transient": c.error_kind in ("connection", "timeout")})
        span: int | None = k
        if reuse:
            n = len(text_tokens(refr.text))
            # the reference stopped at k server tokens (maybe inside a word): compare up to its last whole
            # token; it stopped on its own: one candidate token more shows a candidate that goes on
            span = max(1, n - 1) if refr.finish_reason == "length" else n + 1
        cmp = compare(cand, refr, span)
        tol = self.noise.tolerance(measured, self.ref)
        why = tol.judge(cmp)
        prompt_doubt, reply_doubt = reference_doubts(refr, self.spec, measured)
        by_logprobs = lp and cmp.logprob_mean is not None
        if prompt_doubt or (reply_doubt and not by_logprobs):
            return self._unusable(res, prompt_doubt or reply_doubt, lp, cmp)
        if reply_doubt:  # the prompt logprobs still compare the prefill; the continuation does not
            why = [w for w in why if not w.startswith("edit distance")]
        res.evidence["reference"] = {**cmp.to_dict(), "diverges": bool(why), "reused_reply": reuse,
                                     "tolerance": {"edit_distance": round(tol.edit_distance, 4),
                                                   "logprob": round(tol.logprob, 5),
                                                   "logprob_window": round(tol.logprob_window, 5),
                                                   "calibrated_at": tol.calibrated_at},
                                     "text_outcome": res.outcome.value,
                                     # both continuations, bounded: the report shows them side by side (issue 25)
                                     "continuation": cand.text[:CONTINUATION_CHARS],
                                     "reference_continuation": refr.text[:CONTINUATION_CHARS]}
        if lp and cmp.logprob_mean is None:
            res.evidence["reference"]["prompt_logprobs"] = "not offered by both servers"
        if reply_doubt:
            res.evidence["reference"]["note"] = (f"the reference's continuation is unusable ({reply_doubt}): "
                                                 "judged on prompt logprobs only")
        text_bad = res.outcome == Outcome.GARBAGE
        reason = f"diverges from the reference: {cmp.figure()} ({'; '.join(why)})" if why else ""
        if self.diverges_bad and why:
            res.outcome = Outcome.GARBAGE
            res.reasons = [reason] + (list(res.reasons) if text_bad else [])
        elif text_bad and not self.garbage_bad:
            res.outcome = Outcome.OK  # regress 'diverges' alone: the text verdict is evidence only
            res.reasons = []
        elif why:
            res.evidence["reference"]["note"] = reason
        return res

    def _unusable(self, res: SizeResult, doubt: str, lp: bool, cmp: Comparison | None = None) -> SizeResult:
        """``res`` with the comparison INCONCLUSIVE: "reference unusable: ..." (the text verdict
        stands when it is GARBAGE and counts as bad: the classifier needs no reference)."""
        reason = f"reference unusable: {doubt}" + ("" if lp else f"; {LOGPROBS_HINT}")
        ev: dict[str, Any] = {"unusable": reason, "text_outcome": res.outcome.value}
        if cmp is not None:
            ev.update(cmp.to_dict(), continuation=cmp.candidate_text[:CONTINUATION_CHARS],
                      reference_continuation=cmp.reference_text[:CONTINUATION_CHARS])
        res.evidence["reference"] = ev
        if res.outcome == Outcome.GARBAGE and self.garbage_bad:
            res.reasons = list(res.reasons) + [reason]
            return res
        res.outcome = Outcome.INCONCLUSIVE
        res.reasons = [reason]
        return res


def reference_doubts(refr: Continuation, spec: ReproducerSpec, measured: int | None) -> tuple[str, str]:
    """``(prompt doubt, reply doubt)``: why the reference's greedy reply cannot be the oracle at
    a prompt the candidate measured as ``measured`` tokens (``""`` each when it can).

    * prompt: the reference's ``usage.prompt_tokens`` and the candidate's are not the same count
      (:func:`bisectbot.reproduce.threshold.counts_agree`): not the same prompt;
    * reply: the classifier calls the reference's own reply GARBAGE (a degenerate reply -- one
      word repeated, empty -- carries no information about the prompt), or it has fewer than 2
      words.
    """
    from .classify import classify
    from .threshold import counts_agree

    prompt = ""
    if refr.prompt_tokens and measured and not counts_agree(refr.prompt_tokens, measured):
        prompt = (f"it counted {refr.prompt_tokens} prompt tokens where the candidate counted {measured}: "
                  "not the same prompt (another tokenizer or chat template)")
    reply = ""
    if refr.reply is not None:
        c = classify(refr.reply, spec, [])
        if c.outcome == Outcome.GARBAGE:
            reply = f"its own reply is GARBAGE ({'; '.join(c.reasons)[:200]})"
    if not reply and len(text_tokens(refr.text)) < 2:
        reply = f"its continuation has {len(text_tokens(refr.text))} word(s): it carries no information"
    return prompt, reply


def search_with_reference(endpoint: str, reference: Client, spec: ReproducerSpec, noise: Noise,
                          diverges_bad: bool = True, garbage_bad: bool = True, model: str | None = None,
                          log: Callable[[str], None] | None = None, timeout_s: float = 600.0,
                          api_key: str | None = None, focus: list[int] | None = None) -> ThresholdResult:
    """:func:`bisectbot.reproduce.threshold.search_threshold` on ``endpoint`` (``focus``: sizes asked
    first, issue 23) with every size also
    compared with ``reference`` (see :class:`ReferenceProbe`). The result's ``notes`` start with
    the noise calibration table; its ``reasons`` name the divergence at ``first_garbage``."""
    if spec.reference is None:
        raise ValueError("search_with_reference needs reproducer.reference")
    try:
        reference.model_name()
    except Exception as e:  # noqa: BLE001 - the reference must never end a run with a traceback
        return ThresholdResult(status="error", error=f"reference not ready: {e}", endpoint=endpoint,
                               min_size=spec.min_size, max_size=spec.max_size, transient=True)

    def wrap(inner: HttpProbe) -> ReferenceProbe:
        return ReferenceProbe(inner, reference, spec, noise, diverges_bad, garbage_bad)

    res = search_threshold(endpoint, spec, model=model, log=log, timeout_s=timeout_s, api_key=api_key,
                           wrap_probe=wrap, focus=focus)
    res.notes = noise.table(spec.reference) + res.notes
    return res


def probe_with_reference(endpoint: str, spec: ReproducerSpec, noise_url: str | None = None,
                         model: str | None = None, api_key: str | None = None, timeout_s: float = 600.0,
                         diverges_bad: bool = True, garbage_bad: bool = True,
                         log: Callable[[str], None] | None = None) -> tuple[ThresholdResult, dict[str, Any]]:
    """``bisectbot probe --reference-endpoint``: calibrate the noise between the reference
    (``spec.reference.endpoint``) and ``noise_url`` (a second, different good build) when
    given, search with the comparison, and run the decode control (calibrated on the
    reference) when ``spec.control`` is set. Returns the result and the extra JSON keys
    ``reference`` (endpoint, mode, noise) and, with the control, ``control``/``decode_path``."""
    assert spec.reference is not None
    say = log or (lambda _m: None)
    ref = reference_client(spec.reference, timeout_s=timeout_s)
    noise = Noise(between=f"{spec.reference.endpoint} and {noise_url}" if noise_url else "")
    if noise_url:
        other = Client(noise_url, model=spec.reference.model, timeout_s=timeout_s)
        try:
            other.model_name()
            ref.model_name()
            hi = spec.max_size
            if "max_size" not in spec.model_fields_set and ref.max_model_len:
                hi = min(ref.max_model_len - spec.max_tokens - 64, 128 * 1024)
            noise = calibrate(other, ref, spec, calibration_sizes(spec, spec.min_size, hi), noise.between, log=say)
        except Exception as e:  # noqa: BLE001 - reported, the floors apply
            noise.notes.append(f"calibration failed: {type(e).__name__}: {e}"[:300])
    else:
        noise.notes.append("no second good build (--noise-endpoint): the floors apply, uncalibrated")
    for line in noise.table(spec.reference):
        say(line)
    res = search_with_reference(endpoint, ref, spec, noise, diverges_bad, garbage_bad, model=model, log=say,
                                timeout_s=timeout_s, api_key=api_key)
    mode = ", ".join(m for m, on in (("garbage", garbage_bad), ("diverges", diverges_bad)) if on)
    extra: dict[str, Any] = {"reference": {"endpoint": spec.reference.endpoint, "regress": mode,
                                           "noise": noise.to_dict()}}
    if spec.control is not None and spec.control.enabled:
        from .control import control_pair

        extra.update(control_pair(endpoint, spec.reference.endpoint, spec, model=model, api_key=api_key,
                                  timeout_s=timeout_s, log=say))
    return res, extra


_LOOPBACK = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "[::1]"}


def server_identity(url: str) -> tuple[str, str, int, str]:
    """``(scheme, host, port, path)`` of a server's base URL for "is it the same server": host
    lower-cased, loopback names alike, the default port filled in, a trailing ``/`` and ``/v1`` dropped."""
    from urllib.parse import urlsplit

    u = urlsplit(url.strip())
    host = (u.hostname or "").lower()
    if host in _LOOPBACK:
        host = "loopback"
    try:
        port = u.port or (443 if u.scheme == "https" else 80)
    except ValueError:
        port = -1
    path = u.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[:-3]
    return u.scheme.lower(), host, port, path


def same_server(a: str, b: str) -> bool:
    """True when base URLs ``a`` and ``b`` name the same server (:func:`server_identity`)."""
    return server_identity(a) == server_identity(b)


def reference_client(spec: ReferenceSpec, url: str | None = None, timeout_s: float = 600.0) -> Client:
    """A :class:`Client` of the reference: ``url`` (a started last-good candidate) or ``spec.endpoint``."""
    base = url or spec.endpoint
    if not base:
        raise ValueError("the reference has no URL: start the last-good candidate or set reference.endpoint")
    return Client(base, model=spec.model, timeout_s=timeout_s)


__all__ = ["Comparison", "Continuation", "Noise", "ReferenceProbe", "Tolerance", "calibrate", "calibration_sizes",
           "compare", "greedy", "probe_with_reference", "reference_client", "search_with_reference", "text_tokens"]
