"""The HTTP probe of a threshold search: one prompt size asked of one running OpenAI-compatible server.

:class:`HttpProbe` is ``probe(size) -> SizeResult`` for one server (prompt built to
``size`` tokens, identical requests sent, replies classified and combined one-sidedly);
:func:`search_threshold` runs the pure search (:func:`bisectbot.reproduce.search.search`,
or :func:`bisectbot.reproduce.focus.focused_search` with ``focus``) over it.

:func:`search_threshold` drives one running OpenAI-compatible server;
:func:`bisectbot.reproduce.command.search_threshold_command` runs the same search over
a command reproducer. Both use :func:`search`, which is pure logic over a
``probe(size) -> SizeResult`` callable.

A server error (connection refused, HTTP 5xx, timeout) stops the search with status
``error`` -- never ``garbage``. A rejection as longer than the context is recorded as
"over the limit" (``ERROR``); ``max_size`` is clamped below ``max_model_len`` when the
server reports it (``/tokenize`` or ``/v1/models``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..models import Outcome, PromptKey
from ..recipe import ReproducerSpec
from .classify import STREAM_DIVERGES, Classification, classify, stream_divergence
from .client import Client, Reply, sampling_fields
from .prompts import Prompt, PromptBuilder
from .search import SizeResult, ThresholdResult, effective_repeats, search, vote

#: Tokens kept free below ``max_model_len`` besides ``max_tokens`` (template, rounding).
CONTEXT_MARGIN = 64
#: Largest default ``max_size`` (tokens) when the recipe sets none: min(max_model_len - max_tokens
#: - CONTEXT_MARGIN, this) (issue 15; the longest prompts in public reports are ~137K).
DEFAULT_MAX_SIZE_CAP = 128 * 1024
#: ``usage.prompt_tokens`` and ``/tokenize`` may differ by this share (and 16 tokens) before
#: the probe calls it a disagreement (a chat template counted differently, BOS...).
USAGE_AGREEMENT = 0.03


def counts_agree(a: int, b: int) -> bool:
    """Whether two token counts of one text are the same count: within :data:`USAGE_AGREEMENT` of
    the larger, or 16 tokens (a chat template that gained or lost its few special tokens between
    commits; /tokenize and usage differing by the template on short prompts)."""
    return abs(a - b) <= max(USAGE_AGREEMENT * max(a, b), 16)


#: Plausible characters per token of the filler prompts (real BPE tokenizers: ~1.5-6).
CHARS_PER_TOKEN_RANGE = (0.5, 16.0)
#: Two prompts whose lengths in characters differ by at least this factor cannot measure (nearly)
#: the same ``usage.prompt_tokens`` (within :data:`USAGE_AGREEMENT`) unless the server cut one
#: (issue 37, silent truncation: ollama#3839 reports the longer prompt as exactly the limit). The
#: filler is one text, so its characters per token vary by a few percent between sizes (the
#: tolerance of :data:`USAGE_AGREEMENT`); 1.25 is 8x that, far from any sizing noise and far
#: below the factor between two sizes of a search (at least 1 + ``tolerance``, usually 1.5-16).
PLATEAU_CHARS_RATIO = 1.25
#: Start of the reason of a size whose prompt the server cut silently (``ERROR``).
PLATEAU_REASON = "silent truncation"
#: Start of the reason of a size whose reply came from the server's prefix cache (``INCONCLUSIVE``).
CACHED_REASON = "served from the prefix cache"


def _cut_evidence(evidence: dict[str, Any], reason: str, usage: int) -> dict[str, Any]:
    """``evidence`` with ``truncated_at`` (tokens: the ``usage.prompt_tokens`` this prompt measured)
    when ``reason`` says the server cut the prompt silently (:data:`PLATEAU_REASON`, or an implausibly
    low count for its characters): :func:`bisectbot.reproduce.focus.focused_search` then voids the OK
    of every prompt that measured as much (it may have been cut as well)."""
    if reason.startswith(PLATEAU_REASON) or "silently truncates" in reason:
        return {**evidence, "truncated_at": int(usage)}
    return evidence


# --------------------------------------------------------------------------- HTTP probe


class HttpProbe:
    """``probe(size)`` against one server: build a prompt of ``size`` tokens, send the
    identical request ``effective_repeats(spec)`` times (``concurrency`` at once), classify, combine
    one-sidedly (:func:`one_sided`).
    A size that comes out ``INCONCLUSIVE`` (cut off inside the reasoning) is asked once more
    with ``max_tokens * inconclusive_retry_factor`` (default 4; 1 = no retry). Without
    ``/tokenize`` the first prompt is sized by a guess; when the server's ``prompt_tokens``
    differ by more than the tolerance it is re-sent once calibrated. The first rejection as
    over the context length that names the limit is retried once at the largest accepted size.
    Both cases are listed in ``notes``."""

    def __init__(self, client: Client, spec: ReproducerSpec, builder: PromptBuilder,
                 inconclusive_retry_factor: int = 4):
        self.notes: list[str] = []
        self._limit_learnt = False
        self._tokenize_dropped_now = False
        self._alt: PromptBuilder | None = None
        self.client = client
        self.spec = spec
        self.builder = builder
        self.inconclusive_retry_factor = inconclusive_retry_factor
        #: Sizes whose cold prefill could be checked (``/metrics`` or ``cached_tokens``) and the
        #: ``[hits, queries]`` prompt tokens ``/metrics`` counted over them.
        self.cache_checked = 0
        self.cache_totals = [0, 0]
        #: (prompt characters, ``usage.prompt_tokens``) of every size measured, for :meth:`_plateau`.
        self._measured: list[tuple[int, int]] = []
        #: Print the per-request progress line here; a wrapper that changes the outcome (the reference
        #: comparison) turns it off and prints the outcome that decides (issue 37, input 9).
        self.report_progress = True

    def cache_note(self) -> str:
        """One line for the result's notes: whether the probe's prefills were checked cold."""
        if not self.cache_checked:
            return ("prefix cache: not checked (the server exposes no vllm:prefix_cache_* counters on /metrics and "
                    "no usage.prompt_tokens_details.cached_tokens); every request carried its own cache_salt -- where "
                    "a server ignores it, turn its prefix cache off (vLLM: --no-enable-prefix-caching)")
        hits, queries = self.cache_totals
        return (f"prefix cache: checked at {self.cache_checked} size(s): {hits} of {queries} queried prompt tokens "
                f"were cache hits ({'cold prefills' if hits == 0 else 'NOT all cold: those sizes are inconclusive'};"
                " a fresh cache_salt per request)")

    def _chat(self, messages: list[dict[str, Any]], max_tokens: int) -> Reply:
        """The request a size is judged on: streamed with ``reproducer.stream: on``, else unstreamed
        (``both`` sends its streamed twin through :meth:`_chat_streamed`)."""
        return self.client.chat(messages, max_tokens=max_tokens, temperature=self.spec.temperature,
                                seed=self.spec.seed, stream=self.spec.stream == "on")

    def _chat_streamed(self, messages: list[dict[str, Any]], max_tokens: int) -> Reply:
        return self.client.chat(messages, max_tokens=max_tokens, temperature=self.spec.temperature,
                                seed=self.spec.seed, stream=True)

    def _one(self, prompt: Prompt, max_tokens: int) -> list[tuple[Reply, Classification]]:
        """One request of a size, classified: with ``reproducer.stream: both`` the unstreamed reply
        and its streamed twin (issue 37, input 8), the twin's classification GARBAGE when its text
        differs from the unstreamed one (:func:`stream_divergence`) -- unless a second unstreamed
        reply differs too: then the server's greedy replies do not repeat, and the comparison
        decides nothing (``INCONCLUSIVE``; the extra reply is counted)."""
        plain = self._chat(prompt.messages, max_tokens)
        out = [(plain, classify(plain, self.spec, prompt.needles))]
        if self.spec.stream != "both":
            return out
        twin = self._chat_streamed(prompt.messages, max_tokens)
        c = classify(twin, self.spec, prompt.needles)
        differs = stream_divergence(plain, twin) if plain.ok and twin.ok else None
        # sampled (temperature > 0): the two texts may differ legitimately, each is judged alone
        if differs and c.outcome not in (Outcome.ERROR, Outcome.GARBAGE) and self.spec.temperature == 0:
            again = self._chat(prompt.messages, max_tokens)
            ca = classify(again, self.spec, prompt.needles)
            if again.ok and stream_divergence(plain, again) is None:
                c = Classification(Outcome.GARBAGE, [], differs)
            elif again.ok:
                c = Classification(Outcome.INCONCLUSIVE, [], f"{differs}; but two unstreamed replies to the "
                                   "same prompt differ too: the server's greedy replies do not repeat, so the "
                                   "comparison decides nothing")
            out.append((again, ca))
        out.append((twin, c))
        return out

    def _ask(self, size: int, prompt: Prompt, max_tokens: int) -> SizeResult:
        t0 = time.monotonic()
        before = self.client.prefix_cache()  # /metrics counters around this size's requests (issue 22)
        n = effective_repeats(self.spec)
        replies: list[Reply] = []
        classes: list[Classification] = []
        conc = max(1, self.spec.concurrency)
        with ThreadPoolExecutor(max_workers=conc) as pool:
            done = 0
            while done < n:
                batch = min(conc, n - done)
                got = list(pool.map(lambda _i: self._one(prompt, max_tokens), range(batch)))
                done += batch
                for pairs in got:
                    for r, c in pairs:
                        replies.append(r)
                        classes.append(c)
                if any(c.outcome in (Outcome.ERROR, Outcome.GARBAGE) for c in classes):
                    break  # an error ends the size; one garbage reply decides it (one-sided)
        usage = next((r.prompt_tokens for r in replies if r.prompt_tokens), None)
        measured = usage or prompt.measured_tokens
        res = vote(classes, replies, size, measured, time.monotonic() - t0)
        if usage:
            res.evidence["usage_prompt_tokens"] = usage
        res.evidence["prompt_words"] = prompt.words  # with the seed: the prompt again (issue 25's request.json)
        res.evidence["prompt_seed"] = prompt.seed  # issue 35: seed + words = the prompt's identity (PromptKey)
        if self.spec.stream != "off":
            res.evidence["stream"] = {"mode": self.spec.stream, "streamed_requests": sum(r.streamed for r in replies),
                                      "diverged": any(c.note.startswith(STREAM_DIVERGES) for c in classes)}
        self._check_cold(res, replies, before)
        return res

    def _check_cold(self, res: SizeResult, replies: list[Reply], before: tuple[int, int] | None) -> None:
        """Record whether this size's requests were cold prefills and turn a reply served from the
        prefix cache into ``INCONCLUSIVE`` (issue 22; issue 23, input 6): a cached prefill never ran
        the code path the probe tests, so its reply is not evidence. Two sources, either enough:
        the server's ``/metrics`` counters read before and after the size's requests (hits in
        tokens; the candidate serves only the probe) and each reply's
        ``usage.prompt_tokens_details.cached_tokens``."""
        after = self.client.prefix_cache() if before is not None else None
        cached = [r.cached_tokens for r in replies if r.cached_tokens is not None]
        info: dict[str, Any] = {"cache_salt": self.client.cold}
        hits = None
        if before is not None and after is not None:
            hits, queries = after[0] - before[0], after[1] - before[1]
            info.update(metrics_hits=hits, metrics_queries=queries)
            self.cache_totals[0] += max(0, hits)
            self.cache_totals[1] += max(0, queries)
        if cached:
            info["cached_tokens"] = sum(cached)
        checked = hits is not None or bool(cached)
        info["checked"] = checked
        served = (hits or 0) > 0 or sum(cached) > 0
        info["served_from_cache"] = served
        if checked:
            self.cache_checked += 1
        res.evidence["prefix_cache"] = info
        if served and res.outcome != Outcome.ERROR:
            how = (f"{hits} of {info['metrics_queries']} queried prompt tokens were prefix-cache hits "
                   f"(/metrics)" if (hits or 0) > 0 else f"usage.prompt_tokens_details.cached_tokens {sum(cached)}")
            res.outcome = Outcome.INCONCLUSIVE
            res.reasons = [f"{CACHED_REASON}: {how}; a cached reply is not evidence (the server ignores "
                           "cache_salt? turn its prefix cache off: vLLM --no-enable-prefix-caching)"]

    def __call__(self, size: int) -> SizeResult:
        """``SizeResult`` at ``size`` tokens; never raises (an unexpected failure is an ``ERROR``)."""
        from .. import progress

        t0 = time.monotonic()
        try:
            res = self._probe(size)
        except Exception as e:  # noqa: BLE001 - an odd reply must end as a verdict, never a traceback
            res = SizeResult(size, None, Outcome.ERROR, [f"probe failed: {type(e).__name__}: {e}"[:300]],
                             error_kind="bad-response")
        if self.report_progress:
            progress.request(size, res.outcome.value, time.monotonic() - t0,
                             measured=res.prompt_tokens, counted_by=res.counted_by)
        return res

    def _probe(self, size: int) -> SizeResult:
        first = not self.builder.calibrated
        guessed = first and not self.builder.has_tokenizer
        prompt = self.builder.build(size)
        res = self._ask(size, prompt, self.spec.max_tokens)
        limit = _context_limit(res)
        if limit and res.error_kind == "over-limit" and not self._limit_learnt:
            self._limit_learnt = True
            # the server told its context length: retry once at the largest size it accepts
            # 1 % below: a prompt sized by interpolating usage counts may be off by a few tenths of a percent
            usable = int((limit - self.spec.max_tokens - CONTEXT_MARGIN) * 0.99)
            if 0 < usable < size:
                self.notes.append(f"server context is {limit} tokens: {size} tokens probed as {usable}")
                return self._redo(size, usable, res)
        usage = res.evidence.get("usage_prompt_tokens")
        if usage:
            bad = self._plateau(prompt, usage) or self._cross_check(prompt, usage)
            if bad:
                res = SizeResult(size, usage, Outcome.ERROR, [bad], 1.0, res.votes, res.requests, res.seconds,
                                 error_kind="bad-response", evidence=_cut_evidence(res.evidence, bad, usage))
                return res
            self.builder.calibrate(prompt, usage)
        if (guessed or self._tokenize_dropped_now) and usage and res.outcome != Outcome.ERROR \
                and abs(usage - size) > self.spec.tolerance * size:
            self._tokenize_dropped_now = False
            # sized by a guess (or by a /tokenize found wrong); now calibrated: ask at the real size
            self.notes.append(f"prompt measured {usage} tokens for {size} asked: re-sent after calibration")
            return self._redo(size, size, res)
        return self._finish(size, prompt, res)

    def _plateau(self, prompt: Prompt, usage: int) -> str | None:
        """The reason of an ``ERROR`` when this prompt and an earlier one differ in length by at least
        :data:`PLATEAU_CHARS_RATIO` (characters) but measured the same ``usage.prompt_tokens`` (within
        :data:`USAGE_AGREEMENT`, at least 2 tokens): the server keeps at most that many tokens of a prompt
        and drops the rest without saying so (issue 37; ollama#3839, #17427), so no size above it is
        the size asked. ``None`` otherwise; the pair is remembered either way."""
        chars = max(1, prompt.chars)
        hit = None
        for c0, u0 in self._measured:
            if abs(u0 - usage) <= max(USAGE_AGREEMENT * usage, 2) and \
                    max(c0, chars) / max(1, min(c0, chars)) >= PLATEAU_CHARS_RATIO:
                hit = (c0, u0)
                break
        self._measured.append((chars, usage))
        if hit is None:
            return None
        limit = max(usage, hit[1])
        short, long_ = sorted((hit[0], chars))
        return (f"{PLATEAU_REASON}: prompts of {short} and {long_} characters both measured about {limit} prompt "
                f"tokens (usage.prompt_tokens {hit[1]} and {usage}): the server keeps at most {limit} tokens of a "
                f"prompt and silently drops the rest, so sizes above {limit} tokens are never tested; raise the "
                f"server's context limit or set max_size below {limit}")

    def _cross_check(self, prompt: Prompt, usage: int) -> str | None:
        """Compare the server's ``usage.prompt_tokens`` with ``/tokenize`` and with the prompt's
        characters (issue 11, input 5). ``None`` when they agree; drops a ``/tokenize`` whose
        count is implausible while usage is plausible (sizes then come from usage); else the
        reason of an ``ERROR`` that names both figures."""
        chars = max(1, prompt.chars)

        def plausible(n: int) -> bool:
            return CHARS_PER_TOKEN_RANGE[0] <= chars / max(1, n) <= CHARS_PER_TOKEN_RANGE[1]

        tok = prompt.measured_tokens
        if tok is not None and not counts_agree(tok, usage):
            if plausible(usage) and not plausible(tok):
                self.notes.append(f"/tokenize counted {tok} tokens, usage.prompt_tokens {usage}, for a prompt of "
                                  f"{chars} characters: /tokenize not trusted, sizes from usage.prompt_tokens")
                self.builder.drop_tokenizer()
                self._tokenize_dropped_now = True
                return None
            return (f"prompt size disagreement: /tokenize counts {tok} tokens, usage.prompt_tokens {usage} "
                    f"({chars} characters)")
        if not plausible(usage):
            low = chars / max(1, usage) > CHARS_PER_TOKEN_RANGE[1]
            return (f"usage.prompt_tokens {usage} is implausible for a prompt of {chars} characters "
                    f"(expected {chars // CHARS_PER_TOKEN_RANGE[1]}..{chars // CHARS_PER_TOKEN_RANGE[0]})"
                    + (f"; a server that silently truncates long prompts reports its limit ({usage}?) here"
                       if low else ""))
        return None

    def confirm(self, size: int) -> SizeResult:
        """``SizeResult`` of a second prompt at about ``size`` tokens: another filler seed and
        other needle codes (:meth:`PromptBuilder.sibling`: sized with ``/tokenize`` when the
        server has a trusted one, else from this probe's usage calibration); the prompt aims a
        hair above ``size`` so its measured size is not below it. Its progress line says it is the
        confirmation (a request counted as evidence is always shown)."""
        from .. import progress

        t0 = time.monotonic()
        try:
            if self._alt is None or self._alt.seed != self.spec.seed + 1:
                self._alt = self.builder.sibling(self.spec.seed + 1)
            slack = max(4, size // 1000) if self._alt.has_tokenizer else max(4, size // 200)
            prompt = self._alt.build(size + slack)
            res = self._ask(size, prompt, self.spec.max_tokens)
            res.evidence["confirmation"] = f"seed {self.spec.seed + 1}"
            res = self._truncated(prompt, res) or self._finish(size, prompt, res)
        except Exception as e:  # noqa: BLE001 - never a traceback
            res = SizeResult(size, None, Outcome.ERROR, [f"probe failed: {type(e).__name__}: {e}"[:300]],
                             error_kind="bad-response")
        if self.report_progress:
            progress.request(size, f"{res.outcome.value} (confirmation, filler seed {self.spec.seed + 1})",
                             time.monotonic() - t0, measured=res.prompt_tokens, counted_by=res.counted_by)
        return res

    def ask(self, key: PromptKey) -> SizeResult:
        """``SizeResult`` of exactly the prompt ``key`` names (its filler seed and words: the text
        another candidate was asked, issue 35), labelled with its requested size; never raises."""
        from .. import progress

        t0 = time.monotonic()
        if key.words is None or key.seed is None:
            return self(key.requested)
        try:
            if key.seed == self.builder.seed:
                builder = self.builder
            else:
                if self._alt is None or self._alt.seed != key.seed:
                    self._alt = self.builder.sibling(key.seed)
                builder = self._alt
            prompt = builder.exact(key.requested, key.words)
            res = self._ask(key.requested, prompt, self.spec.max_tokens)
            usage = res.evidence.get("usage_prompt_tokens")
            if usage:
                # the same prompt another candidate was asked: its measured pair joins this probe's
                # plateau check (a server that cuts prompts at one length; issue 35, silent truncation)
                bad = self._plateau(prompt, usage) or self._cross_check(prompt, usage)
                if bad:
                    res = SizeResult(key.requested, usage, Outcome.ERROR, [bad], 1.0, res.votes, res.requests,
                                     res.seconds, error_kind="bad-response",
                                     evidence=_cut_evidence(res.evidence, bad, usage))
                else:
                    builder.observe(key.words, usage)
            if res.outcome != Outcome.ERROR:
                res = self._finish(key.requested, prompt, res)
        except Exception as e:  # noqa: BLE001 - never a traceback
            res = SizeResult(key.requested, None, Outcome.ERROR, [f"probe failed: {type(e).__name__}: {e}"[:300]],
                             error_kind="bad-response")
        progress.request(key.requested, res.outcome.value, time.monotonic() - t0,
                         measured=res.prompt_tokens, counted_by=res.counted_by)
        return res

    def _redo(self, size: int, target: int, before: SizeResult) -> SizeResult:
        prompt = self.builder.build(target)
        res = self._ask(size, prompt, self.spec.max_tokens)
        res.requests += before.requests
        res.seconds += before.seconds
        return self._truncated(prompt, res) or self._finish(size, prompt, res)

    def _truncated(self, prompt: Prompt, res: SizeResult) -> SizeResult | None:
        """``res`` turned ``ERROR`` when its usage shows a silent truncation (:meth:`_plateau`), else ``None``."""
        usage = res.evidence.get("usage_prompt_tokens")
        bad = self._plateau(prompt, usage) if usage else None
        if bad is None:
            return None
        return SizeResult(res.requested, usage, Outcome.ERROR, [bad], 1.0, res.votes, res.requests, res.seconds,
                          error_kind="bad-response", evidence=_cut_evidence(res.evidence, bad, usage))

    def _finish(self, size: int, prompt: Prompt, res: SizeResult) -> SizeResult:
        # more room changes nothing for a misrouted reply or one served from the prefix cache
        misrouted = any(r.startswith(("misrouted", CACHED_REASON)) for r in res.reasons)
        if res.outcome == Outcome.INCONCLUSIVE and self.inconclusive_retry_factor > 1 and not misrouted:
            # cut off inside the reasoning: ask once more with more room before giving up on this size
            more = self.spec.max_tokens * self.inconclusive_retry_factor
            again = self._ask(size, prompt, more)
            again.requests += res.requests
            again.seconds += res.seconds
            for k, v in res.votes.items():
                again.votes[k] = again.votes.get(k, 0) + v
            if again.outcome == Outcome.INCONCLUSIVE:
                again.reasons = [f"{r} (also with max_tokens {more})" for r in again.reasons]
            return again
        return res


def _context_limit(res: SizeResult) -> int | None:
    """The context length named in an over-limit rejection ("maximum context length is N tokens")."""
    import re

    for r in res.reasons:
        m = re.search(r"maximum context length is (\d+)", r)
        if m:
            return int(m.group(1))
    return None



def _stream_note(spec: ReproducerSpec) -> list[str]:
    """The result's note on how replies were asked (``reproducer.stream``, issue 37); none for ``off``."""
    if spec.stream == "on":
        return ["stream on: every chat request was streamed (server-sent events reassembled, usage from the last "
                "chunk) and the reassembled text judged"]
    if spec.stream == "both":
        return ["stream both: every request was also sent streamed; a streamed reply that differs from the "
                "unstreamed one (same prompt, same seed, greedy) is a finding of its own"
                + ("" if spec.temperature == 0 else " -- not judged here: temperature > 0 samples")]
    return []


def search_threshold(endpoint: str, spec: ReproducerSpec, model: str | None = None,
                     log: Callable[[str], None] | None = None, timeout_s: float = 600.0,
                     api_key: str | None = None,
                     wrap_probe: Callable[[HttpProbe], Callable[[int], SizeResult]] | None = None,
                     focus: list[int] | None = None) -> ThresholdResult:
    """Find the prefill threshold of the OpenAI-compatible server at ``endpoint``.

    ``endpoint`` is ``http://host:port`` (a trailing ``/v1`` is accepted); ``model``
    ``None`` = the first model of ``/v1/models``. ``timeout_s`` bounds each chat request
    (seconds). ``log`` receives one line per probe. ``wrap_probe`` may wrap the HTTP probe
    (issue 18: :class:`bisectbot.reproduce.reference.ReferenceProbe`). ``focus``: sizes (tokens)
    where the bisection's bad end failed, asked first (:func:`bisectbot.reproduce.focus.focused_search`,
    issue 23). Returns a :class:`ThresholdResult`;
    never raises for server trouble (status ``error`` with the reason instead).
    """
    t0 = time.monotonic()
    say = log or (lambda _m: None)
    client = Client(endpoint, model=model, timeout_s=timeout_s, api_key=api_key)
    try:
        name = client.model_name()
    except Exception as e:  # noqa: BLE001 - ServerError and anything the server's reply breaks
        return ThresholdResult(status="error", error=f"server not ready: {e}", endpoint=client.base_url,
                               wall_s=time.monotonic() - t0, min_size=spec.min_size, max_size=spec.max_size)
    builder = PromptBuilder(spec.question, needles=spec.needles, seed=spec.seed, tokenize=client.tokenize)
    notes: list[str] = []

    def error(msg: str) -> ThresholdResult:
        return ThresholdResult(status="error", error=msg, notes=notes + client.problems + builder.problems, model=name,
                               endpoint=client.base_url, wall_s=time.monotonic() - t0, min_size=spec.min_size,
                               max_size=spec.max_size)

    try:
        builder.learn()  # tokens per filler word and max_model_len (2 /tokenize calls)
    except Exception as e:  # noqa: BLE001 - a server reply must never end the run with a traceback
        return error(f"sizing prompts failed: {type(e).__name__}: {e}")
    hi = spec.max_size
    if client.max_model_len:
        usable = client.max_model_len - spec.max_tokens - CONTEXT_MARGIN
        if usable < 1:
            return error(f"server max_model_len {client.max_model_len} leaves no room for a prompt "
                         f"(max_tokens {spec.max_tokens} + {CONTEXT_MARGIN})")
        if "max_size" not in spec.model_fields_set:
            hi = min(usable, DEFAULT_MAX_SIZE_CAP)
            notes.append(f"max_size {hi} = min(max_model_len {client.max_model_len} - max_tokens "
                         f"{spec.max_tokens} - {CONTEXT_MARGIN}, {DEFAULT_MAX_SIZE_CAP})")
            say(notes[-1])
        elif usable < hi:
            notes.append(f"max_size {hi} clamped to {usable}: longer prompts are too long for this server "
                         f"(max_model_len {client.max_model_len} "
                         f"- max_tokens {spec.max_tokens} - {CONTEXT_MARGIN})")
            say(notes[-1])
            hi = usable
    elif "max_size" not in spec.model_fields_set:
        notes.append(f"server reports no max_model_len: max_size {hi} (the default; set reproducer.max_size)")
    lo = min(spec.min_size, hi)
    if spec.min_size > hi:  # issue 23: said, not silently clamped
        notes.append(f"min_size {spec.min_size} is above the largest usable size {hi} tokens"
                     + (f" (server max_model_len {client.max_model_len})" if client.max_model_len else "")
                     + f": only {hi} tokens probed")
        say(notes[-1])
    if not builder.has_tokenizer:
        notes.append("server has no usable /tokenize: sizes calibrated from usage.prompt_tokens")
    probe = HttpProbe(client, spec, builder)
    if focus:
        from .focus import focused_search

        res = focused_search(wrap_probe(probe) if wrap_probe else probe, spec, lo, hi, focus, log=say)
    else:
        res = search(wrap_probe(probe) if wrap_probe else probe, spec, lo, hi, log=say)
    res.sampling = sampling_fields(spec.temperature, spec.seed)
    sent = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in res.sampling.items())
    res.notes = notes + client.problems + builder.problems + probe.notes + res.notes + [probe.cache_note()] + \
        [f"sampling sent with every request: {sent} (none left to the server's defaults)"] + _stream_note(spec)
    res.model = name
    res.endpoint = client.base_url
    res.wall_s = time.monotonic() - t0
    return res
