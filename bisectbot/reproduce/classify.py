"""Garbage classifiers: one reply in, ``OK`` / ``GARBAGE`` / ``ERROR`` / ``INCONCLUSIVE`` out.

Each classifier returns a :class:`Signal` (name, score, reason, flagged); the verdict
combines them: any flagged signal makes the reply ``GARBAGE`` (its reasons are kept),
none makes it ``OK``. A failed request is ``ERROR`` (a dead server is never garbage);
a reply cut off by ``max_tokens`` inside the reasoning (empty content,
``finish_reason == "length"``) whose reasoning looks sane is ``INCONCLUSIVE``.
Reasoning and content are scored together: garbage can hide in either.

Classifiers (thresholds from :class:`bisectbot.recipe.ClassifierSettings`, tuned on
the labelled corpus ``tests/data/outputs``; ``benchmarks/classifier.py`` measures them):

==================  ==========================================================================
``empty``           no content and no reasoning
``unique-ratio``    distinct words / words < ``unique_ratio_min`` (0.15, the classic check), >= 30 words
``window-unique``   minimum of that ratio over sliding windows of ``window_words`` words
                    (< ``window_unique_ratio_min``): catches a reply that collapses mid-stream
``compression``     zlib ratio (raw bytes / compressed bytes) > ``compression_ratio_max``, >= 200 bytes
``control-chars``   share of control / private-use / unassigned / U+FFFD characters > ``control_char_share_max``
``repeat-run``      longest run of one repeated token n-gram (n <= 6) >= ``max_repeat_run``; a
                    flood of one non-alphanumeric character (``!!!!!!``, ``,,,,``)
``digit-chain``     >= 40 digits in a row, or >= 30 single-digit tokens in a row
``stray-script``    isolated one-letter fragments of another script (``the 的 model 는 ...``) or
                    code identifiers with foreign letters inside (``value_는0``) in Latin text
``known-answer``    the recipe's ``expected_answer`` is not in the answer (number words count: "four")
``needles``         share of needle codes retrieved exactly < ``needle_recall_min``; near misses
                    (one character off) are named -- fluent-but-wrong answers are only caught here
``too-short``       fewer than ``min_reply_tokens`` completion tokens
==================  ==========================================================================
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..models import Outcome
from ..recipe import ClassifierSettings, ReproducerSpec
from .client import Reply

_WORD = re.compile(r"\w+", re.UNICODE)
_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
                 "fifteen sixteen seventeen eighteen nineteen twenty").split()


class Signal(NamedTuple):
    """One classifier's opinion: ``score`` (its measure, unit in the reason), a one-line
    ``reason``, and ``flagged`` (True = this classifier calls the reply garbage)."""

    classifier: str
    score: float
    reason: str
    flagged: bool = False


@dataclass
class Classification:
    """Verdict on one reply: ``outcome`` and every classifier's :class:`Signal`."""

    outcome: Outcome
    signals: list[Signal] = field(default_factory=list)
    note: str = ""

    @property
    def reasons(self) -> list[str]:
        """Reasons of the flagged signals (garbage), or the error/inconclusive note."""
        flagged = [f"{s.classifier}: {s.reason}" for s in self.signals if s.flagged]
        return flagged or ([self.note] if self.note else [])

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome.value, "reasons": self.reasons, "note": self.note,
                "signals": [s._asdict() for s in self.signals]}


# --------------------------------------------------------------------------- text statistics


def unique_ratio(words: list[str]) -> float:
    """Distinct words / words (lower-cased); 1.0 for no words."""
    return len({w.lower() for w in words}) / len(words) if words else 1.0


def window_unique_min(words: list[str], window: int) -> float:
    """Minimum :func:`unique_ratio` over windows of ``window`` words (step window/5)."""
    if len(words) < window:
        return unique_ratio(words)
    low = [w.lower() for w in words]
    step = max(1, window // 5)
    starts = list(range(0, len(low) - window + 1, step))
    if starts[-1] != len(low) - window:
        starts.append(len(low) - window)
    return min(len(set(low[i:i + window])) / window for i in starts)


def compression_ratio(text: str) -> float:
    """UTF-8 bytes / zlib-compressed bytes (level 9)."""
    raw = text.encode("utf-8", "replace")
    return len(raw) / max(1, len(zlib.compress(raw, 9)))


def control_share(text: str) -> tuple[float, int]:
    """(share, count) of control (except tab/newline/CR), format, private-use, surrogate,
    unassigned and U+FFFD characters among all characters."""
    bad = 0
    for ch in text:
        if ch in "\t\n\r":
            continue
        if ch == "\ufffd" or unicodedata.category(ch) in ("Cc", "Co", "Cs", "Cn"):
            bad += 1
    return (bad / len(text) if text else 0.0), bad


def longest_repeat(tokens: list[str], max_n: int = 6) -> tuple[int, str]:
    """Longest run of one n-gram (n <= ``max_n``) repeated back to back: (repeats, n-gram)."""
    best, what = 1, ""
    low = [t.lower() for t in tokens]
    for n in range(1, max_n + 1):
        for off in range(n):  # every alignment of the n-gram grid
            run = 1
            for i in range(off + n, len(low) - n + 1, n):
                if low[i:i + n] == low[i - n:i]:
                    run += 1
                    if run > best:
                        best, what = run, " ".join(low[i:i + n])
                else:
                    run = 1
    return best, what


def char_flood(text: str) -> tuple[float, str]:
    """(share, char) of the most frequent non-space character among non-space characters."""
    chars = [c for c in text if not c.isspace()]
    if not chars:
        return 0.0, ""
    counts: dict[str, int] = {}
    for c in chars:
        counts[c] = counts.get(c, 0) + 1
    c, n = max(counts.items(), key=lambda kv: kv[1])
    return n / len(chars), c


def digit_chain(text: str) -> tuple[int, int]:
    """(longest run of digit characters, longest run of single-digit tokens)."""
    longest = max((len(m) for m in re.findall(r"\d+", text)), default=0)
    run = best = 0
    for t in _TOKEN.findall(text):
        if len(t) == 1 and t.isdigit():
            run += 1
            best = max(best, run)
        elif t.isalnum():
            run = 0
    return longest, best


def _script(ch: str) -> str:
    if not ch.isalpha():
        return ""
    try:
        name = unicodedata.name(ch)
    except ValueError:
        return "OTHER"
    head = name.split(" ")[0]
    if head in ("CJK", "HIRAGANA", "KATAKANA", "IDEOGRAPHIC"):
        return "CJK"
    return head  # LATIN, CYRILLIC, HANGUL, ARABIC, GREEK, HEBREW, ...


def script_noise(text: str) -> tuple[int, int, str]:
    """(isolated foreign one-letter fragments, identifiers with foreign letters inside, example)
    for text whose dominant script is Latin; (0, 0, "") otherwise."""
    counts: dict[str, int] = {}
    for ch in text:
        s = _script(ch)
        if s:
            counts[s] = counts.get(s, 0) + 1
    total = sum(counts.values())
    if not total or counts.get("LATIN", 0) / total < 0.7:
        return 0, 0, ""
    stray = mixed = 0
    example = ""
    for m in re.finditer(r"\S+", text):
        tok = m.group(0)
        word = "".join(ch for ch in tok if ch.isalnum() or ch == "_")
        if not word:
            continue
        scripts = [_script(ch) for ch in word]
        foreign = [s for s in scripts if s and s != "LATIN"]
        if not foreign:
            continue
        if len(word) == 1:
            stray += 1
            example = example or word
        elif "LATIN" in scripts and ("_" in word or any(ch.isdigit() for ch in word)
                                     or re.search(r"[A-Za-z][^\x00-\x7f]+[A-Za-z]", word)):
            mixed += 1
            example = example or word
    return stray, mixed, example


def _needle_near_miss(needle: str, text: str) -> str | None:
    """A code in ``text`` that differs from ``needle`` by one character (same shape), if any."""
    pat = re.compile(r"\b[A-Z]{3,12}-\d{3,6}\b")
    for cand in pat.findall(text):
        if len(cand) == len(needle) and sum(a != b for a, b in zip(cand, needle)) == 1:
            return cand
    return None


def answer_present(expected: str, text: str) -> bool:
    """True when ``expected`` (case-insensitive, on word boundaries) is in ``text``; a small
    integer also matches its English word ("4" ~ "four")."""
    forms = [expected.strip()]
    if forms[0].isdigit() and int(forms[0]) < len(_NUMBER_WORDS):
        forms.append(_NUMBER_WORDS[int(forms[0])])
    for f in forms:
        # ASCII boundaries only: CJK text writes "2加2等于4。" with no spaces
        if f and re.search(r"(?<![0-9A-Za-z])(?<!\d\.)" + re.escape(f) + r"(?![0-9A-Za-z]|\.\d)", text,
                           re.IGNORECASE):
            return True
    return False


# --------------------------------------------------------------------------- the verdict


def text_signals(text: str, cs: ClassifierSettings) -> list[Signal]:
    """The text-statistics signals of one text (no knowledge of the question)."""
    words = _WORD.findall(text)
    tokens = _TOKEN.findall(text)
    out: list[Signal] = []
    ur = unique_ratio(words)
    out.append(Signal("unique-ratio", round(ur, 4), f"{len({w.lower() for w in words})} distinct of {len(words)} words "
                      f"(ratio {ur:.3f} < {cs.unique_ratio_min})", len(words) >= 30 and ur < cs.unique_ratio_min))
    wu = window_unique_min(words, cs.window_words)
    out.append(Signal("window-unique", round(wu, 4), f"a {cs.window_words}-word window has unique-word ratio "
                      f"{wu:.3f} < {cs.window_unique_ratio_min}",
                      len(words) >= cs.window_words and wu < cs.window_unique_ratio_min))
    cr = compression_ratio(text)
    out.append(Signal("compression", round(cr, 3), f"compresses {cr:.1f}x (> {cs.compression_ratio_max})",
                      len(text.encode()) >= 200 and cr > cs.compression_ratio_max))
    share, nbad = control_share(text)
    out.append(Signal("control-chars", round(share, 4), f"{nbad} control/replacement characters "
                      f"({share:.1%} > {cs.control_char_share_max:.0%})", nbad >= 3 and share > cs.control_char_share_max))
    rep, gram = longest_repeat(tokens)
    fshare, fch = char_flood(text)
    nonspace = sum(1 for c in text if not c.isspace())
    flood = nonspace >= 6 and fshare >= 0.8 and (not fch.isalnum() or nonspace >= 20)
    if flood:
        out.append(Signal("repeat-run", float(nonspace), f"flood of {fch!r} ({fshare:.0%} of {nonspace} characters)",
                          True))
    else:
        if re.fullmatch(r"([-=*#_~])\1*", gram.replace(" ", "")) and rep <= 120:
            rep = 1  # a separator line (# =====, ------) is layout, not a loop
        out.append(Signal("repeat-run", float(rep), f"{gram!r} repeated {rep} times in a row (>= {cs.max_repeat_run})",
                          rep >= cs.max_repeat_run))
    dl, ds = digit_chain(text)
    out.append(Signal("digit-chain", float(max(dl, ds)), f"{dl} digits in a row" if dl >= 40
                      else f"{ds} single digits in a row", dl >= 40 or ds >= 30))
    stray, mixed, ex = script_noise(text)
    out.append(Signal("stray-script", float(stray + mixed),
                      f"{stray} isolated foreign letters, {mixed} identifiers with foreign letters (e.g. {ex!r})",
                      stray >= 3 or mixed >= 2))
    return out


def classify(reply: Reply, spec: ReproducerSpec, needles: list[str]) -> Classification:
    """Classify one reply to a prompt built for ``spec`` with ``needles`` embedded.

    ``ERROR``: the request failed (``reply.error``; an over-limit rejection says
    "over the limit"). ``INCONCLUSIVE``: cut off by ``max_tokens`` inside the reasoning
    and the reasoning itself looks sane. ``GARBAGE``: any flagged signal. Else ``OK``.
    Pure function, no I/O.
    """
    cs = spec.classifier
    if reply.error is not None:
        note = reply.error if reply.error_kind != "over-limit" else f"over the limit: {reply.error}"
        return Classification(Outcome.ERROR, [], note)
    content = reply.content or ""
    reasoning = reply.reasoning or ""
    text = (reasoning + "\n" + content).strip()
    if not text:
        return Classification(Outcome.GARBAGE, [Signal("empty", 0.0, "empty reply (no content, no reasoning)", True)])
    signals = text_signals(text, cs)
    stats_bad = any(s.flagged for s in signals)
    cut_in_reasoning = reply.finish_reason == "length" and not content.strip() and bool(reasoning.strip())
    if cut_in_reasoning and not stats_bad:
        return Classification(Outcome.INCONCLUSIVE, signals,
                              "cut off by max_tokens inside the reasoning; raise max_tokens")
    answer = content if content.strip() else text
    if not content.strip() and reply.finish_reason != "length":
        signals.append(Signal("empty", 0.0, "empty content after the reasoning", True))
    if spec.expected_answer:
        ok = answer_present(spec.expected_answer, answer)
        signals.append(Signal("known-answer", 1.0 if ok else 0.0, f"expected answer {spec.expected_answer!r} missing",
                              not ok))
    if needles:
        found = [n for n in needles if n in answer]
        score = len(found) / len(needles)
        missing = [n for n in needles if n not in found]
        detail = []
        for n in missing:
            near = _needle_near_miss(n, answer)
            detail.append(f"{n} answered as {near}" if near else f"{n} missing")
        signals.append(Signal("needles", round(score, 3), f"retrieved {len(found)}/{len(needles)} needles: "
                              + ", ".join(detail), score < cs.needle_recall_min))
    ntok = reply.completion_tokens if reply.completion_tokens is not None else len(_TOKEN.findall(text))
    signals.append(Signal("too-short", float(ntok), f"{ntok} completion tokens (< {cs.min_reply_tokens})",
                          ntok < cs.min_reply_tokens))
    if any(s.flagged for s in signals):
        return Classification(Outcome.GARBAGE, signals)
    return Classification(Outcome.OK, signals)


def classic_unique_ratio(reply: Reply, min_ratio: float = 0.15, min_tokens: int = 10) -> Outcome:
    """The classic hand-reproducer check alone: OK iff unique-word ratio > ``min_ratio``
    and at least ``min_tokens`` completion tokens (the baseline of ``benchmarks/classifier.py``)."""
    if reply.error is not None:
        return Outcome.ERROR
    text = ((reply.reasoning or "") + "\n" + (reply.content or "")).strip()
    words = _WORD.findall(text)
    ntok = reply.completion_tokens if reply.completion_tokens is not None else len(_TOKEN.findall(text))
    return Outcome.OK if unique_ratio(words) > min_ratio and words and ntok >= min_tokens else Outcome.GARBAGE
