"""Deterministic, token-sized prompts for the prefill-threshold reproducer.

A prompt is a long **system** message of filler text -- hash-seeded sentences that
read like function signatures (``fn_kestrel_3fa9(ledger: dict, span_41: int) -> ...``),
all different, so a tokenizer cannot compress them and a model cannot shortcut
them -- with ``needles`` (codes like ``KESTREL-4417``) placed at evenly spaced depths,
and a short **user** message: the recipe's question, plus a request to list the
needles when there are any.

The system message starts with a short **preamble** (:func:`preamble`: ``[3fa9c01e]``, 8 hex
characters derived from the filler seed and word count), so prompts of different sizes differ from
their first tokens (issue 37): a server that ignores ``cache_salt`` cannot serve the start of a larger
prompt from the prefix cache of a smaller one (the filler of one seed is one text, so without it
every smaller prompt is a prefix of the next). The preamble is a function of ``(seed, words)``, the
prompt's identity (:class:`bisectbot.models.PromptKey`), so the same key still gives the same text,
and candidate and reference are sent the same messages.

Sizes are prompt **tokens**. :class:`PromptBuilder` learns tokens per filler word
from the server's ``/tokenize`` when it exists (vLLM has it; 2 calls) and corrects the
filler length of the first prompts until the count is within :data:`SIZE_SLACK` of the
target (at most :data:`MAX_TOKENIZE_STEPS` calls each). Once a real request's
``usage.prompt_tokens`` is known (:meth:`PromptBuilder.calibrate`) prompts are sized by
interpolating the server's own counts and ``/tokenize`` is no longer called (issue 15:
at most one ``/tokenize`` call per chat request). Without ``/tokenize`` a
characters-per-token guess sizes the first prompt. Either way the threshold search
records the real ``prompt_tokens`` the server reports.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: A built prompt is accepted when ``|measured - target| <= max(3, SIZE_SLACK * target)`` tokens.
PROMPT_FORMAT = 2
"""Version of the text a prompt identity (filler seed, words) builds. Part of every probe key of a
prompt-building reproducer (:func:`bisectbot.session.probing.executor.reproducer_key`): a cached
verdict measured on other text is never compared with prompts of this format (issue 35: a
candidate is compared with the bad end on the same prompts). Bump it whenever the text changes.
2: every prompt opens with a preamble derived from its identity (cold prefills, issue 37)."""

SIZE_SLACK = 0.0005
#: Initial characters per token before calibration (typical of BPE on English/code).
DEFAULT_CHARS_PER_TOKEN = 4.0
#: ``/tokenize`` calls per prompt while sizing before calibration (first estimate + corrections).
MAX_TOKENIZE_STEPS = 3
#: Plausible characters per token of the filler; a ``/tokenize`` outside is not used.
PLAUSIBLE_CHARS_PER_TOKEN = (0.5, 16.0)

_NEEDLE_WORDS = ("KESTREL OSPREY MERLIN HERON PLOVER SISKIN WREN LINNET AVOCET DUNLIN GANNET PETREL "
                 "CURLEW BITTERN FULMAR SHRIKE").split()
_VERBS = ("returns merges caches splits ranks filters loads encodes scales flushes pins rotates drains folds "
          "shards probes hashes packs unpacks clamps masks gathers scatters reduces broadcasts quantises "
          "dequantises tiles fuses prunes batches streams serialises validates normalises interleaves "
          "transposes permutes evicts prefetches replays commits rolls snapshots throttles").split()
_NOUNS = ("ledger cursor buffer tensor shard window bucket frame table index span queue block vector record "
          "segment lattice kernel stride offset pointer heap arena slab page cache_line warp wavefront lane "
          "register fence barrier mutex channel socket header footer payload digest nonce epoch tick quota "
          "budget lease token_map head_dim rope_base scale_factor zero_point codebook histogram bitmap "
          "bloom_filter trie cursor_pool").split()
_TYPES = ("int", "str", "bytes", "float", "dict", "list[int]", "tuple[int, int]", "Tensor", "bool", "None",
          "Optional[str]", "Sequence[float]", "Mapping[str, int]", "np.ndarray", "torch.dtype", "Path",
          "Iterator[bytes]", "set[str]", "complex", "memoryview")
_ADJ = ("merged sorted pinned sparse dense stale fresh partial padded rotated quantised aligned contiguous "
        "strided masked frozen mutable shared private remote local cold warm hot lazy eager nested flat "
        "signed unsigned packed ragged").split()
_TEMPLATES = (
    "Function {name}({params}) {verb} the {adj} {noun} of stage {n} and yields {typ}.",
    "Method {name} takes {params}; it {verb} every {adj} {noun} below {n} and raises {err} otherwise.",
    "Helper {name}({params}) is called {n} times per step, {verb} one {noun} and returns {typ}.",
    "In module {mod}, {name}({params}) {verb} {n} {adj} entries of the {noun} table.",
    "Routine {name} ({params}) {verb} the {noun} after {n} retries unless the {adj} flag is set.",
)
_ERRORS = ("ValueError", "KeyError", "RuntimeError", "TimeoutError", "OverflowError", "IndexError")


def _rng(seed: int, *key: Any) -> random.Random:
    h = hashlib.blake2b(repr((seed,) + key).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(h, "big"))


def filler_sentence(seed: int, i: int) -> str:
    """Sentence ``i`` of the filler for ``seed``: a unique, signature-like line of ~20-40 tokens."""
    r = _rng(seed, "s", i)
    name = f"{r.choice(_VERBS)[:-1]}_{r.choice(_NOUNS)}_{r.getrandbits(16):04x}"
    params = ", ".join(f"{r.choice(_NOUNS)}_{r.randrange(100)}: {r.choice(_TYPES)}" for _ in range(r.randint(1, 3)))
    mod = f"{r.choice(_NOUNS)}.{r.choice(_ADJ)}_{r.getrandbits(12):03x}"
    return r.choice(_TEMPLATES).format(name=name, params=params, verb=r.choice(_VERBS), adj=r.choice(_ADJ),
                                       noun=r.choice(_NOUNS), n=r.randrange(10000), typ=r.choice(_TYPES),
                                       err=r.choice(_ERRORS), mod=mod)


def needle_codes(seed: int, n: int) -> list[str]:
    """``n`` distinct codes like ``KESTREL-4417`` for ``seed``."""
    r = _rng(seed, "needles")
    words = r.sample(_NEEDLE_WORDS, k=min(n, len(_NEEDLE_WORDS)))
    while len(words) < n:
        words.append(r.choice(_NEEDLE_WORDS))
    return [f"{w}-{r.randrange(1000, 10000)}" for w in words]


def needle_sentence(k: int, code: str) -> str:
    """The sentence that carries needle ``k`` (1-based)."""
    return f"Note for the auditor: the access code of vault {k} is {code}."


def question_text(question: str, needles: list[str]) -> str:
    """The user message: the recipe's question, plus the needle request when there are needles."""
    if not needles:
        return question
    return (f"{question} Also list the access codes of vaults 1 to {len(needles)} that the document "
            "mentions, exactly as written.")


@dataclass
class Prompt:
    """A built prompt. ``target_tokens`` was asked; ``measured_tokens`` is the server's
    ``/tokenize`` count (``None`` when it has no such endpoint); ``words`` is the
    number of filler words; ``needles`` the codes embedded, in depth order."""

    messages: list[dict[str, Any]]
    target_tokens: int
    measured_tokens: int | None
    words: int
    needles: list[str] = field(default_factory=list)
    chars: int = 0
    seed: int = 0  # the filler seed: with ``words``, the text (bisectbot.models.PromptKey)


_WORD_CACHE: dict[int, tuple[list[str], list[int]]] = {}


def filler_words(seed: int, n: int) -> list[str]:
    """The first ``n`` words (whitespace-separated) of the filler for ``seed`` (cached per seed)."""
    words, done = _WORD_CACHE.setdefault(seed, ([], [0]))
    while len(words) < n:
        words.extend(filler_sentence(seed, done[0]).split())
        done[0] += 1
    return words[:n]


def preamble(seed: int, words: int) -> str:
    """The first words of a prompt's system message: ``[3fa9c01e]``, 8 hex characters of a hash of the
    filler ``seed`` and the number of filler ``words`` (which the size sets): prompts of different sizes
    start differently, so no prefix cache serves one prompt's start from another's (issue 37)."""
    return "[" + hashlib.blake2b(repr(("preamble", seed, words)).encode(), digest_size=4).hexdigest() + "]"


def build_messages(seed: int, words: int, question: str, needles: list[str]) -> list[dict[str, Any]]:
    """System message: :func:`preamble`, then the first ``words`` filler words with ``needles`` at depths
    k/(n+1); user message: the question."""
    body = list(filler_words(seed, words))
    n = len(needles)
    for k in range(n, 0, -1):  # insert from the back so earlier positions stay valid
        pos = round(len(body) * k / (n + 1))
        body.insert(pos, needle_sentence(k, needles[k - 1]))
    system = (preamble(seed, words) + " You are a careful assistant. The following document lists internal functions.\n\n"
              + " ".join(body) + "\n\nEnd of document.")
    return [{"role": "system", "content": system}, {"role": "user", "content": question_text(question, needles)}]


class PromptBuilder:
    """Builds prompts of a target size in tokens for one server.

    ``tokenize(messages) -> int | None`` counts tokens on the server (``Client.tokenize``);
    ``None`` (or a callable returning ``None``) falls back to characters-per-token.
    ``needles`` is the number of needle codes (0 = none); ``seed`` fixes filler and codes.
    """

    def __init__(self, question: str, needles: int = 0, seed: int = 0,
                 tokenize: Callable[[list[dict[str, Any]]], int | None] | None = None):
        self.question = question
        self.seed = seed
        self.needles = needle_codes(seed, needles) if needles else []
        self._tokenize = tokenize
        self.chars_per_token = DEFAULT_CHARS_PER_TOKEN
        self.tokens_per_word: float | None = None
        self.base_tokens: float | None = None  # tokens of a prompt with no filler
        self._calibrated = False
        self._observed: dict[int, int] = {}  # filler words -> prompt tokens reported by the server
        self.tokenize_calls = 0
        self.problems: list[str] = []
        self._anchors: dict[int, int] = {}  # filler words -> /tokenize counts learnt (used below the observations)

    def _count(self, messages: list[dict[str, Any]]) -> int | None:
        if self._tokenize is None:
            return None
        self.tokenize_calls += 1
        n = self._tokenize(messages)
        if n is None:
            self._tokenize = None
        return n

    def drop_tokenizer(self) -> None:
        """Stop using ``/tokenize`` (found wrong); sizes come from ``usage.prompt_tokens``."""
        self._tokenize = None
        self.tokens_per_word = None
        self.base_tokens = None
        self._anchors = {}

    @property
    def _tokenizer_agreed(self) -> bool:
        return bool(self._anchors) and self._tokenize is not None

    def learn(self) -> None:
        """Learn tokens per filler word from ``/tokenize`` (2 calls) when there is one. A count
        that is not plausible for the characters sent (``PLAUSIBLE_CHARS_PER_TOKEN``) -- a
        ``/tokenize`` that lies -- turns it off and is noted in :attr:`problems`."""
        if not self.has_tokenizer or self.tokens_per_word is not None:
            return
        m0, m1 = self.messages(0), self.messages(400)
        n0 = self._count(m0)
        n1 = self._count(m1) if n0 is not None else None
        if n0 is None or n1 is None:
            return
        c0, c1 = self._chars(m0), self._chars(m1)
        lo, hi = PLAUSIBLE_CHARS_PER_TOKEN
        if n0 < 1 or n1 <= n0 or not (lo <= c0 / n0 <= hi and lo <= (c1 - c0) / (n1 - n0) <= hi):
            self.problems.append(f"/tokenize counted {n0} and {n1} tokens for {c0} and {c1} characters "
                                 "(implausible): not used, sizes from usage.prompt_tokens")
            self.drop_tokenizer()
            return
        self.base_tokens = float(n0)
        self.tokens_per_word = (n1 - n0) / 400
        self._anchors = {0: n0, 400: n1}

    def messages(self, words: int) -> list[dict[str, Any]]:
        return build_messages(self.seed, words, self.question, self.needles)

    def exact(self, target_tokens: int, words: int) -> Prompt:
        """The prompt of ``words`` filler words (this builder's seed), labelled ``target_tokens``: the
        same text another server was asked (issue 35: candidates compared on the same prompts)."""
        msgs = self.messages(words)
        return Prompt(msgs, target_tokens, None, words, list(self.needles), self._chars(msgs), self.seed)

    @staticmethod
    def _chars(messages: list[dict[str, Any]]) -> int:
        return sum(len(m["content"]) for m in messages)

    def calibrate(self, prompt: Prompt, prompt_tokens: int | None) -> None:
        """Learn from a request's ``usage.prompt_tokens`` (servers without /tokenize): the
        characters-per-token ratio, and the (filler words, tokens) point used to interpolate."""
        if prompt_tokens and prompt_tokens > 0 and prompt.chars > 0:
            self.chars_per_token = prompt.chars / prompt_tokens
            self._calibrated = True
            self._observed[prompt.words] = prompt_tokens

    def sibling(self, seed: int) -> PromptBuilder:
        """A builder of the same question with another filler ``seed`` (other needle codes) that
        reuses what this one learnt: the trusted ``/tokenize`` and its per-word rate when there is
        one (no new learning calls), else the usage observations (no ``/tokenize`` at all)."""
        alt = PromptBuilder(self.question, needles=len(self.needles), seed=seed, tokenize=self._tokenize)
        alt.chars_per_token = self.chars_per_token
        if self._tokenize is not None and self.tokens_per_word is not None:
            alt.base_tokens, alt.tokens_per_word = self.base_tokens, self.tokens_per_word
            alt._anchors = dict(self._anchors)
        else:
            alt._tokenize = None
            for words, tokens in self._observed.items():
                alt.observe(words, tokens)
        return alt

    @property
    def observations(self) -> dict[int, int]:
        """Filler words -> prompt tokens the server reported (a copy)."""
        return dict(self._observed)

    def observe(self, words: int, tokens: int) -> None:
        """Record that a prompt with ``words`` filler words measured ``tokens`` on the server."""
        if tokens > 0:
            self._observed[words] = tokens
            self._calibrated = True

    def _interpolate(self, target_tokens: int) -> tuple[int, float, bool]:
        """(filler words, tokens per word, bracketed) for ``target_tokens`` from the server's own
        counts: the line through the two observations that bracket it (``bracketed``), else
        through the two nearest, or through one observation and the prompt without filler."""
        obs = sorted(self._observed.items(), key=lambda wt: wt[1])
        if target_tokens < obs[0][1] and self._tokenizer_agreed:
            # below every observation: the /tokenize anchors (0 and 400 filler words) bracket better
            obs = sorted({**self._anchors, **self._observed}.items(), key=lambda wt: wt[1])
        below = [o for o in obs if o[1] <= target_tokens]
        above = [o for o in obs if o[1] > target_tokens]
        bracketed = bool(below and above) and below[-1][0] in self._observed and above[0][0] in self._observed
        if below and above:
            pair = [below[-1], above[0]]
        else:
            pair = sorted(obs, key=lambda wt: abs(wt[1] - target_tokens))[:2]
        if len(pair) == 2 and pair[0][0] != pair[1][0] and pair[0][1] != pair[1][1]:
            (w1, t1), (w2, t2) = pair
            rate = (t2 - t1) / (w2 - w1)
        else:
            w1, t1 = pair[0]
            base = self.base_tokens if self.base_tokens is not None else \
                self._chars(self.messages(0)) / self.chars_per_token  # prompt without filler
            rate = (t1 - base) / max(1, w1)
        rate = max(0.1, rate)
        return max(0, round(w1 + (target_tokens - t1) / rate)), rate, bracketed

    def _next_words(self, tried: dict[int, int], target_tokens: int, s: int, n: int) -> int:
        """The next filler word count to measure while sizing with ``/tokenize``: between the nearest
        counts measured below and above ``target_tokens`` when there are both (the filler's tokens per
        word vary locally: one step by the average rate can jump over the target), else one step by
        the learnt tokens per word from the last measurement (``s`` words, ``n`` tokens)."""
        assert self.tokens_per_word is not None
        below = [(t, w) for w, t in tried.items() if t < target_tokens]
        above = [(t, w) for w, t in tried.items() if t > target_tokens]
        if below and above:
            (t1, w1), (t2, w2) = max(below), min(above)
            if w2 > w1:
                return w1 + max(1, min(w2 - w1 - 1, round((target_tokens - t1) * (w2 - w1) / (t2 - t1))))
        return max(0, s + round((target_tokens - n) / self.tokens_per_word))

    @property
    def calibrated(self) -> bool:
        """True once a server-reported prompt size was learnt (:meth:`calibrate`)."""
        return self._calibrated

    @property
    def has_tokenizer(self) -> bool:
        return self._tokenize is not None

    def build(self, target_tokens: int) -> Prompt:
        """A prompt of about ``target_tokens`` prompt tokens (see :data:`SIZE_SLACK`).

        Once calibrated by ``usage.prompt_tokens``: interpolate the server's counts (no
        ``/tokenize`` call). Else with ``/tokenize``: start from a per-word estimate, then
        correct by the measured error (at most :data:`MAX_TOKENIZE_STEPS` calls). Else:
        size by ``chars_per_token``. Raises :class:`ValueError` for ``target_tokens < 1``.
        """
        if target_tokens < 1:
            raise ValueError(f"target size must be >= 1 token, got {target_tokens}")
        slack = max(3, int(SIZE_SLACK * target_tokens))
        self.learn()
        if self.has_tokenizer and self.tokens_per_word is not None and not self._observed:
            assert self.base_tokens is not None
            s = max(0, round((target_tokens - self.base_tokens) / self.tokens_per_word))
            best: tuple[int, int] | None = None
            tried: dict[int, int] = {}
            for _ in range(MAX_TOKENIZE_STEPS):
                msgs = self.messages(s)
                n = self._count(msgs)
                if n is None:
                    break
                tried[s] = n
                if best is None or abs(n - target_tokens) < abs(best[1] - target_tokens):
                    best = (s, n)
                if abs(n - target_tokens) <= slack:
                    break
                s_new = self._next_words(tried, target_tokens, s, n)
                if s_new == s or s_new in tried:
                    break
                s = s_new
            if best is not None:
                msgs = self.messages(best[0])
                return Prompt(msgs, target_tokens, best[1], best[0], list(self.needles), self._chars(msgs), self.seed)
        if self._observed:
            # calibrated: the server's usage counts; /tokenize only to check an extrapolation (<= 1 call)
            s, rate, bracketed = self._interpolate(target_tokens)
            msgs = self.messages(s)
            measured = None
            if not bracketed and self.has_tokenizer:
                measured = self._count(msgs)
                if measured is not None and abs(measured - target_tokens) > slack:
                    s = max(0, s + round((target_tokens - measured) / rate))
                    msgs, measured = self.messages(s), None
            return Prompt(msgs, target_tokens, measured, s, list(self.needles), self._chars(msgs), self.seed)
        # characters-per-token sizing
        base = self._chars(self.messages(0))
        per = self._chars(self.messages(400)) - base
        want_chars = target_tokens * self.chars_per_token
        s = max(0, round((want_chars - base) / max(1.0, per / 400)))
        msgs = self.messages(s)
        return Prompt(msgs, target_tokens, None, s, list(self.needles), self._chars(msgs), self.seed)
