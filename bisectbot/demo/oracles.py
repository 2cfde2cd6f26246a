"""Reference-engine modes for the oracles beyond the text classifier (issue 18).

Used by :mod:`bisectbot.demo.engine`; kept apart so the engine's classifier-facing modes
(issue 11) and these evolve without conflicts. Engine settings read here:

* ``grounded`` (bool): a coherent reply to a question without arithmetic is a two-sentence
  summary built from the document itself -- the first function the document describes
  and the last one, quoted -- so two engines reading the same prompt answer the same
  text, and one that reads the wrong part does not.
* ``subtle`` (bool, implies ``grounded``): at or above ``threshold`` prompt tokens the
  reply stays fluent and well-formed but is built from the wrong part of the prompt
  (the sentences just after the middle of the document, as if a prefill sub-chunk read a
  stale workspace), and ``prompt_logprobs`` from prompt position :data:`SUBCHUNK` on
  shift by 0.3-0.8 nats. No text statistic sees it; a comparison with a good engine does.
* ``numerics`` (int or null): a build's numeric identity. Two engines with different
  values answer the same text but their ``prompt_logprobs`` differ by Gaussian noise
  whose scale grows with the prompt length (:func:`noise_sigma`), like two healthy
  builds with different kernels.
* ``decode_broken_after`` (completion tokens or null): a broken decode path -- every
  number generated after that many completion tokens is off by one (fluent, wrong).
* ``tail_logprobs`` (prompt positions or null): at or above ``threshold`` only the last that many
  prompt positions' log-probabilities shift by :data:`TAIL_SHIFT`; the reply text stays healthy
  (issue 37, input 5: the bug touches the prompt's tail and averages away over the prompt).

Requests: ``prompt_logprobs: k`` (vLLM's extension, k >= 0) in a chat request adds a
top-level ``prompt_logprobs`` list like vLLM's: ``None`` for the first prompt token, then
one ``{token_id: {"logprob", "rank", "decoded_token"}}`` per prompt token. ``Count from 1 to
N`` questions (the decode control) are answered with ``N`` numbered lines ``k.``.
"""

from __future__ import annotations

import random
import re
import zlib
from typing import Any

#: Prompt position (tokens) from which a subtle engine's prompt log-probabilities shift
#: (the second prefill sub-chunk; the motivating bug broke later sub-chunks).
SUBCHUNK = 2048
#: Noise scale (nats) of prompt log-probabilities between builds at a short prompt.
NOISE_BASE = 0.002
#: Prompt tokens over which the noise scale doubles.
NOISE_LENGTH = 16384
#: Shift (nats) of the last ``tail_logprobs`` prompt positions of a bad size (issue 37, input 5: a
#: planted chunked-prefill bug on an H200 read a largest |Δ| of at least 1.58 nats at every bad size).
TAIL_SHIFT = 1.6

_NAME_RE = re.compile(r"\b[a-z]+_[a-z0-9_]*[a-z0-9]_[0-9a-f]{4}\b")
_COUNT_RE = re.compile(r"count from 1 to (\d+)", re.I)
_NUM_RE = re.compile(r"\d+")
_TOKEN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def noise_sigma(prompt_tokens: int) -> float:
    """Standard deviation (nats) of the per-position log-probability noise between two builds."""
    return NOISE_BASE * (1.0 + prompt_tokens / NOISE_LENGTH)


def _sentences(document: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.;])\s+", document) if _NAME_RE.search(s)]


def _clause(sentence: str) -> str:
    s = sentence.strip().rstrip(".;")
    return s[0].lower() + s[1:] if s else s


def document_of(messages: list[dict[str, Any]], text_of: Any) -> str:
    """The longest message's text (the document of a threshold prompt)."""
    texts = [text_of(m.get("content")) for m in messages]
    return max(texts, key=len) if texts else ""


def summary(document: str, wrong_part: bool = False) -> str | None:
    """Two fluent sentences quoting the document's first and last described function, or
    (``wrong_part``) two functions from just after the document's middle. ``None`` when the
    document describes no function."""
    sents = _sentences(document)
    if len(sents) < 4:
        return None
    if wrong_part:
        mid = len(sents) // 2
        first, last = sents[mid], sents[mid + 1]
    else:
        first, last = sents[0], sents[-1]
    return (f"It opens by saying that {_clause(first)}. It closes by noting that {_clause(last)}, and "
            "everything between follows the same pattern of parameters and return types.")


def count_reply(question: str) -> str | None:
    """``1.\\n2.\\n...N.`` for a ``Count from 1 to N`` question, else ``None``."""
    m = _COUNT_RE.search(question)
    if not m:
        return None
    n = min(int(m.group(1)), 20000)
    return "\n".join(f"{k}." for k in range(1, n + 1))


def break_decode(content: str, after_tokens: int) -> str:
    """``content`` with every number after the first ``after_tokens`` tokens off by one."""
    count = 0
    out: list[str] = []
    pos = 0
    for m in _TOKEN_RE.finditer(content):
        count += 1
        if count > after_tokens and m.group().isdigit():
            out.append(content[pos:m.start()])
            out.append(str(int(m.group()) + 1))
            pos = m.end()
    out.append(content[pos:])
    return "".join(out)


def prompt_logprobs(tokens: list[str], prompt_tokens: int, numerics: int | None, shifted: bool,
                    k: int = 0, tail: int = 0) -> list[dict[str, dict[str, Any]] | None]:
    """vLLM-shaped ``prompt_logprobs`` for a prompt of ``prompt_tokens`` tokens whose text tokens
    are ``tokens`` (padded with template tokens). Deterministic per token pair; ``numerics``
    adds the build's noise; ``shifted`` moves positions >= :data:`SUBCHUNK`; ``tail`` moves the last
    ``tail`` positions by :data:`TAIL_SHIFT`. ``k`` extra
    alternatives per position (rank 2..k+1)."""
    toks = (["<|t|>"] * max(0, prompt_tokens - len(tokens)) + tokens)[:prompt_tokens] if tokens else \
        ["<|t|>"] * prompt_tokens
    rng = random.Random(f"numerics:{numerics}:{prompt_tokens}") if numerics is not None else None
    sigma = noise_sigma(prompt_tokens)
    shift_rng = random.Random(f"shift:{prompt_tokens}")
    out: list[dict[str, dict[str, Any]] | None] = [None]
    prev = toks[0] if toks else ""
    for i in range(1, len(toks)):
        t = toks[i]
        tid = zlib.crc32(t.encode()) % 100000
        base = -((zlib.crc32(f"{prev}\x00{t}".encode()) % 6000) / 1000.0) - 0.01
        if rng is not None:
            base += rng.gauss(0.0, sigma)
        if shifted and i >= SUBCHUNK:
            base -= 0.3 + 0.5 * shift_rng.random()
        if tail and i >= len(toks) - tail:
            base -= TAIL_SHIFT
        base = min(base, 0.0)
        rank = 1 + (zlib.crc32(f"r{prev}{t}".encode()) % 5)
        entry = {str(tid): {"logprob": round(base, 6), "rank": rank, "decoded_token": t}}
        for j in range(k):
            alt = f"{t}~{j}"
            entry[str(zlib.crc32(alt.encode()) % 100000)] = {"logprob": round(base - 1.0 - j, 6), "rank": j + 2,
                                                             "decoded_token": alt}
        out.append(entry)
        prev = t
    return out


def logprob_tokens(messages: list[dict[str, Any]], text_of: Any) -> list[str]:
    """Text tokens of a chat prompt in order (role and content of each message)."""
    out: list[str] = []
    for m in messages:
        out += _TOKEN_RE.findall(str(m.get("role", "")))
        out += _TOKEN_RE.findall(text_of(m.get("content")))
    return out


def reply(settings: dict[str, Any], messages: list[dict[str, Any]], bad: bool,
          text_of: Any) -> tuple[str, str] | None:
    """(reasoning, content) of this module's modes for one chat request, or ``None`` to let the
    engine answer as before. ``bad`` is the engine's own decision (at or above the threshold,
    after the flaky flip): a subtle engine answers it fluently from the wrong part."""
    question = text_of(messages[-1].get("content")) if messages else ""
    counted = count_reply(question)
    if counted is not None and not bad:
        return "", counted
    grounded = settings.get("grounded") or settings.get("subtle")
    if not grounded or re.search(r"\d+\s*[-+*x×]\s*\d+", question):
        return None
    if bad and not settings.get("subtle"):
        return None
    text = summary(document_of(messages, text_of), wrong_part=bad)
    return None if text is None else ("", text)


def finish(settings: dict[str, Any], content: str) -> str:
    """The reply content after the decode path (``decode_broken_after``)."""
    after = settings.get("decode_broken_after")
    return break_decode(content, int(after)) if after is not None else content


def extra_fields(settings: dict[str, Any], body: dict[str, Any], messages: list[dict[str, Any]], ptoks: int,
                 bad: bool, text_of: Any) -> dict[str, Any]:
    """Top-level reply fields for this request: ``prompt_logprobs`` when asked for."""
    k = body.get("prompt_logprobs")
    if k is None or isinstance(k, bool) or not isinstance(k, int) or k < 0:
        return {}
    shifted = bool(settings.get("subtle")) and bad
    tail = int(settings.get("tail_logprobs") or 0) if bad else 0
    return {"prompt_logprobs": prompt_logprobs(logprob_tokens(messages, text_of), ptoks,
                                               settings.get("numerics"), shifted, min(k, 5), tail)}
