"""Garbage classifiers: one reply in, ``OK`` / ``GARBAGE`` / ``ERROR`` / ``INCONCLUSIVE`` out.

Each classifier returns a :class:`Signal` (name, score, reason, flagged, weak). The
verdict weighs them (issue 11): a flagged **strong** signal -- a collapse of the text
(loops, floods, salad, noise, template leaks) or a wrong answer (expected answer or
needle codes missing) -- makes the reply ``GARBAGE``; a flagged **weak** signal (the
reply is short, the global unique-word ratio of structured text is low) only adds
weight to a strong one and never makes ``GARBAGE`` alone. A reply that contains the
expected answer or recalls the needles and shows no collapse signal is never
``GARBAGE``. When the recipe checks neither answer nor needles, ``too-short`` is the
only evidence of a missing answer and counts as strong.

A failed request is ``ERROR`` (a dead server is never garbage). A reply cut off by
``max_tokens`` inside the reasoning (empty content, ``finish_reason == "length"``)
whose reasoning looks sane is ``INCONCLUSIVE``. An answer found only in the reasoning
(empty content, sane reasoning with the answer, finish ``stop``) is a reasoning-parser
routing fault, not corruption: ``INCONCLUSIVE`` with reason ``misrouted``, or judged as
the answer when the recipe sets ``classifier.accept_reasoning``. No content and no
reasoning is ``GARBAGE`` with reason "empty reply" -- unless the reply says why it is
empty: tool calls instead of content are ``INCONCLUSIVE`` (``misrouted: tool call``), a
refusal (``content_filter``, ``message.refusal``) or an aborted request is ``ERROR``
(``refused: ...``), a cut by ``max_tokens`` before any text is ``INCONCLUSIVE``; none of
these is corruption (issue 11, kind 3). Reasoning and content are scored
together for collapse: garbage can hide in either.

Classifiers (thresholds from :class:`bisectbot.recipe.ClassifierSettings`, tuned on
the labelled corpus ``tests/data/outputs``; ``benchmarks/classifier.py`` measures them):

=======================  ==========================================================================
``empty``                no content and no reasoning
``unique-ratio``         distinct words / words < ``unique_ratio_min`` (0.15, the classic check), >= 30 words;
                         weak: logs, tables and refrains have low global ratios too
``window-unique``        minimum of that ratio over sliding windows of ``window_words`` words
                         (< ``window_unique_ratio_min``): catches a reply that collapses mid-stream
``compression``          zlib ratio (raw bytes / compressed bytes) > ``compression_ratio_max``, >= 200 bytes
``control-chars``        share of control / private-use / unassigned / U+FFFD characters > ``control_char_share_max``
``detokenizer-residue``  what the detokenizer left unfinished (:mod:`bisectbot.reproduce.rawtext`): >= 3
                         SentencePiece ``▁`` or byte-level BPE ``Ġ``/``Ċ`` word marks making >= 20 % of the
                         words, >= 3 byte-fallback pieces ``<0x0A>``, >= 2 UTF-8 characters read with the
                         wrong codec (``Ã¼``, ``â€™``); weak below (a reply may talk about the markers)
``repeat-run``           a token n-gram of any period (a word, a sentence, a paragraph; one token per
                         character in scripts without spaces) repeated >= ``max_repeat_run`` times, or
                         >= 15 repeats covering >= 60 % of the reply, or -- cut by ``max_tokens`` --
                         >= 4 repeats running into the cut and covering >= half of the reply; a flood
                         of one non-alphanumeric character (``!!!!!!``, ``,,,,``). Measured, like
                         ``compression``, without formatting rules: lines of dash/symbol/punctuation
                         characters of any script (``━━━``, ``＊＊＊``, ``┌──┬──┐``), by Unicode category;
                         the same rules over characters (issue 37): a unit inside one token or with
                         any separator or none (``microsecondmicrosecond``, ``ab,ab,``) is a loop too
``whitespace-flood``     on the raw reply: a run of blank characters (whitespace and ``Cf``: zero-width
                         spaces) of >= 120 characters or >= 24 line breaks, or >= 64 / 8 up to the
                         ``max_tokens`` cut; weak: >= 4 completion tokens per visible character
``digit-chain``          >= 40 digits in a row, or >= 30 single-digit tokens in a row
``stray-script``         isolated one-letter fragments of another script (``the 的 model 는 ...``) or
                         code identifiers with foreign letters inside (``value_는0``) in Latin text
``template-leak``        chat-template special tokens in the reply (``<start_of_turn>``, ``<|im_end|>``,
                         ``[/INST]``, ``<|eot_id|>``, ``<unk>``...): a template/tokenizer mismatch
``salad``                prose of >= 20 Latin/Cyrillic words with almost no function words
                         (share < ``function_word_share_min`` 0.10 of English/German/French/Spanish/Italian/Portuguese/Russian ones)
``known-answer``         the recipe's ``expected_answer`` is not in the answer (number words count:
                         "four", "vier", "quatre", "cuatro", "четыре", "四"...)
``needles``              share of needle codes retrieved exactly < ``needle_recall_min``; near misses
                         (one character off) are named -- fluent-but-wrong answers are only caught here
``tail-salad``           the text after the answer's last sentence judged on its own: >= 10 prose words
                         with a function-word share < ``function_word_share_min`` after an answer written
                         in a language the list knows; weak otherwise (>= 5 words)
``too-short``            fewer than ``min_reply_tokens`` completion tokens; weak when the answer or
                         the needles are checked
=======================  ==========================================================================
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
from .rawtext import (
    char_loop,
    detokenizer_residue,
    layout_text,
    longest_blank_run,
    longest_loop,
    loop_tokens,
    visible_chars,
)

_WORD = re.compile(r"\w+", re.UNICODE)
_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
                 "fifteen sixteen seventeen eighteen nineteen twenty").split()
#: Number words 0..12 in other languages the corpus covers (German, French, Spanish, Italian,
#: Portuguese, Russian, Chinese/Japanese numerals, Korean native and Sino-Korean words).
_NUMBER_WORDS_INTL = [w.split("|") for w in (
    "null|zéro|zero|cero|ноль|〇|零|영", "eins|un|une|uno|um|uma|один|одна|一|하나|한",
    "zwei|deux|dos|due|dois|duas|два|две|二|둘|두", "drei|trois|tres|tre|três|три|三|셋|세",
    "vier|quatre|cuatro|quattro|quatro|четыре|四|넷|네", "fünf|cinq|cinco|cinque|пять|五|다섯",
    "sechs|six|seis|sei|шесть|六|여섯", "sieben|sept|siete|sette|sete|семь|七|일곱",
    "acht|huit|ocho|otto|oito|восемь|八|여덟", "neun|neuf|nueve|nove|девять|九|아홉",
    "zehn|dix|diez|dieci|dez|десять|十|열", "elf|onze|once|undici|одиннадцать|十一|열하나",
    "zwölf|douze|doce|dodici|doze|двенадцать|十二|열둘")]
#: Chat-template special tokens of common templates (Gemma, Llama 2/3, ChatML/Qwen, Phi, GLM,
#: DeepSeek, Mistral, gpt-oss harmony, GPT-2/NeoX); any one of them in a reply is a leak.
_TEMPLATE_TOKENS = re.compile(
    r"<(?:start|end)_of_turn>|\[/?INST\]|<</?SYS>>|<\|im_(?:start|end|sep)\|>|<\|eot_id\|>"
    r"|<\|(?:start|end)_header_id\|>|<\|(?:begin|end)_of_text\|>|<\|endoftext\|>|<\|eom_id\|>"
    r"|<\|(?:user|assistant|system|end|observation)\|>|\[gMASK\]|<sop>|<eop>"
    r"|<｜(?:begin▁of▁sentence|end▁of▁sentence|User|Assistant)｜>|<\|(?:start|channel|message|return|call)\|>"
    r"|<\|reserved_special_token_\d+\|>|<\|fim_\w+\|>|<(?:unk|pad|bos|eos)>")
#: Tokens that also occur in ordinary markup (``<s>`` is HTML strike-through): two are needed.
_TEMPLATE_TOKENS_WEAK = re.compile(r"</?s>")
#: Function words of the languages the classifier knows; prose without them is word salad.
_FUNCTION_WORDS = frozenset("""
the a an of and or to in on at is are was were be been it this that these those for with as by from not no
but if so then than there their they he she we you i my your our its his her them me us do does did has
have had will would can could should may might must which who whom what when where why how all any some
der die das den dem des ein eine einen einem und oder zu im in ist sind war nicht mit von für auf es sie er
wir ich du dass auch als wie aber
le la les un une des du de et ou à au aux en est sont il elle ils nous vous je ne pas que qui pour dans
sur avec ce cette
el los las unos unas y o en es son no que por para con su se lo al del
il lo gli i uno e è di da per che non con
o os as um uma e é de do da dos das em no na não que com por para
и в во на не что с со как а но он она они мы вы я это по к из у за от то же
""".split())


class Signal(NamedTuple):
    """One classifier's opinion: ``score`` (its measure, unit in the reason), a one-line
    ``reason``, ``flagged`` (True = this classifier finds fault with the reply) and
    ``weak`` (True = a flagged weak signal only adds weight to a strong one)."""

    classifier: str
    score: float
    reason: str
    flagged: bool = False
    weak: bool = False

    @property
    def strong(self) -> bool:
        """Flagged and not weak: enough on its own for ``GARBAGE``."""
        return self.flagged and not self.weak


@dataclass
class Classification:
    """Verdict on one reply: ``outcome`` and every classifier's :class:`Signal`."""

    outcome: Outcome
    signals: list[Signal] = field(default_factory=list)
    note: str = ""

    @property
    def reasons(self) -> list[str]:
        """Reasons of the flagged signals (garbage; strong ones first), or the error/inconclusive note."""
        if self.outcome != Outcome.GARBAGE:
            return [self.note] if self.note else []
        flagged = [f"{s.classifier}: {s.reason}" for s in self.signals if s.strong]
        flagged += [f"{s.classifier}: {s.reason} (weak)" for s in self.signals if s.flagged and s.weak]
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


def longest_repeat(tokens: list[str]) -> tuple[int, str]:
    """Longest run of one token n-gram of any period repeated back to back: (repeats, n-gram),
    case-insensitive (see :func:`bisectbot.reproduce.rawtext.longest_loop`)."""
    most, _ = longest_loop([t.lower() for t in tokens])
    return most.repeats, most.unit


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


def _answer_pattern(expected: str) -> re.Pattern[str] | None:
    """The forms of ``expected`` (see :func:`answer_present`) as one case-insensitive pattern."""
    forms = [expected.strip()]
    if forms[0].isdigit() and int(forms[0]) < len(_NUMBER_WORDS):
        forms.append(_NUMBER_WORDS[int(forms[0])])
        if int(forms[0]) < len(_NUMBER_WORDS_INTL):
            forms.extend(_NUMBER_WORDS_INTL[int(forms[0])])
    forms = [f for f in forms if f]
    if not forms:
        return None
    # ASCII boundaries only: CJK text writes "2加2等于4。" with no spaces
    return re.compile(r"(?<![0-9A-Za-z])(?<!\d\.)(?:" + "|".join(map(re.escape, forms)) + r")(?![0-9A-Za-z]|\.\d)",
                      re.IGNORECASE)


def answer_present(expected: str, text: str) -> bool:
    """True when ``expected`` (case-insensitive, on word boundaries) is in ``text``; a small
    integer also matches its number word in English and in :data:`_NUMBER_WORDS_INTL`
    ("4" ~ "four", "vier", "четыре", "四")."""
    pat = _answer_pattern(expected)
    return bool(pat and pat.search(text))


#: End of a sentence (any script) or of a line.
_SENTENCE_END = re.compile(r"[.!?\n\u3002\uff01\uff1f]")


def answer_end(text: str, expected: str | None, needles: list[str]) -> int | None:
    """Index in ``text`` just after the sentence holding the last of the expected answer and
    the needle codes -- where the answer ends and its tail begins; ``None`` when neither is in it."""
    ends = [i + len(n) for n in needles if (i := text.rfind(n)) >= 0]
    pat = _answer_pattern(expected) if expected else None
    if pat is not None:
        ends += [m.end() for m in pat.finditer(text)][-1:]
    if not ends:
        return None
    m = _SENTENCE_END.search(text, max(ends))
    return m.end() if m else len(text)


def template_leaks(text: str) -> list[str]:
    """Chat-template special tokens found in ``text`` (``<|im_end|>``, ``[/INST]``...); the
    markup-like ``<s>``/``</s>`` count only when there are two or more."""
    found = _TEMPLATE_TOKENS.findall(text)
    weak = _TEMPLATE_TOKENS_WEAK.findall(text)
    return found + (weak if len(weak) >= 2 else [])


def function_word_share(text: str) -> tuple[float, int]:
    """(share of function words, words) over the Latin/Cyrillic alphabetic words of ``text``;
    (1.0, n) when the text does not read as prose (code, tables, lists, numbers)."""
    if "```" in text or text.count("|") >= 4 or text.count("\n") > 3:
        return 1.0, 0
    words = [w for w in _WORD.findall(text) if w.isalpha() and _script(w[0]) in ("LATIN", "CYRILLIC")]
    tokens = _TOKEN.findall(text)
    if not words or len(words) < 0.7 * len(tokens):
        return 1.0, len(words)
    return sum(w.lower() in _FUNCTION_WORDS for w in words) / len(words), len(words)


# --------------------------------------------------------------------------- the verdict


def text_signals(text: str, cs: ClassifierSettings, cut: bool = False) -> list[Signal]:
    """The text-statistics signals of one text (no knowledge of the question). ``cut``: the
    reply was cut by ``max_tokens`` (``finish_reason == "length"``): a loop that runs into
    the cut is a loop at any length. Floods, loops and compression are measured on
    :func:`~bisectbot.reproduce.rawtext.layout_text` (formatting rules of any script removed)."""
    words = _WORD.findall(text)
    layout = layout_text(text)
    out: list[Signal] = []
    ur = unique_ratio(words)
    out.append(Signal("unique-ratio", round(ur, 4), f"{len({w.lower() for w in words})} distinct of {len(words)} words "
                      f"(ratio {ur:.3f} < {cs.unique_ratio_min})", len(words) >= 30 and ur < cs.unique_ratio_min,
                      weak=True))
    wu = window_unique_min(words, cs.window_words)
    out.append(Signal("window-unique", round(wu, 4), f"a {cs.window_words}-word window has unique-word ratio "
                      f"{wu:.3f} < {cs.window_unique_ratio_min}",
                      len(words) >= cs.window_words and wu < cs.window_unique_ratio_min))
    cr = compression_ratio(layout)
    out.append(Signal("compression", round(cr, 3), f"compresses {cr:.1f}x (> {cs.compression_ratio_max})",
                      len(layout.encode()) >= 200 and cr > cs.compression_ratio_max))
    share, nbad = control_share(text)
    out.append(Signal("control-chars", round(share, 4), f"{nbad} control/replacement characters "
                      f"({share:.1%} > {cs.control_char_share_max:.0%})", nbad >= 3 and share > cs.control_char_share_max))
    out.append(_residue_signal(text))
    out.append(_repeat_signal(layout, cs, cut))
    dl, ds = digit_chain(text)
    out.append(Signal("digit-chain", float(max(dl, ds)), f"{dl} digits in a row" if dl >= 40
                      else f"{ds} single digits in a row", dl >= 40 or ds >= 30))
    stray, mixed, ex = script_noise(text)
    out.append(Signal("stray-script", float(stray + mixed),
                      f"{stray} isolated foreign letters, {mixed} identifiers with foreign letters (e.g. {ex!r})",
                      stray >= 3 or mixed >= 2))
    leaks = template_leaks(text)
    out.append(Signal("template-leak", float(len(leaks)), f"{len(leaks)} chat-template token(s), e.g. "
                      f"{leaks[0] if leaks else ''!r}", bool(leaks)))
    fw, nwords = function_word_share(text)
    out.append(Signal("salad", round(fw, 3), f"{nwords} words, {fw:.0%} function words "
                      f"(< {cs.function_word_share_min:.0%}): word salad",
                      nwords >= 20 and fw < cs.function_word_share_min))
    return out


#: Word marks per word from which leftover SentencePiece / byte-level BPE marks are unambiguous:
#: a reply that mentions the marker ("SentencePiece writes ▁Two") has one or two in many words.
RESIDUE_MARK_SHARE = 0.2


def _residue_signal(text: str) -> Signal:
    """``detokenizer-residue``: strong for >= 3 SentencePiece or byte-level BPE word marks making
    >= :data:`RESIDUE_MARK_SHARE` of the words, >= 3 byte-fallback pieces, or >= 2 characters
    read with the wrong codec; weak for fewer (a reply may talk about them)."""
    r = detokenizer_residue(text)
    words = max(1, r.words)
    parts = [f"{n} {what}" for n, what in ((r.sp_marks, "SentencePiece word marks (U+2581)"),
                                           (r.bpe_marks, "byte-level BPE space/newline marks (U+0120/U+010A)"),
                                           (r.byte_pieces, "byte-fallback pieces (<0xNN>)"),
                                           (r.mojibake, "UTF-8 characters read with the wrong codec")) if n]
    strong = any(n >= 3 and n / words >= RESIDUE_MARK_SHARE for n in (r.sp_marks, r.bpe_marks)) or \
        r.byte_pieces >= 3 or r.mojibake >= 2
    total = r.sp_marks + r.bpe_marks + r.byte_pieces + r.mojibake
    return Signal("detokenizer-residue", float(total),
                  f"{', '.join(parts)} in {r.words} words (e.g. {r.example!r}): the detokenizer left its work "
                  "unfinished" if parts else "", bool(total), weak=not strong)


def _repeat_signal(layout: str, cs: ClassifierSettings, cut: bool) -> Signal:
    """``repeat-run``: a flood of one non-space character, an n-gram of any period repeated
    >= ``max_repeat_run`` times, >= 15 repeats covering >= 60 % of a reply, or -- in a reply
    cut by ``max_tokens`` -- >= 4 repeats running into the cut and covering >= half of it."""
    fshare, fch = char_flood(layout)
    nonspace = sum(1 for c in layout if not c.isspace())
    if nonspace >= 6 and fshare >= 0.8 and (not fch.isalnum() or nonspace >= 20):
        return Signal("repeat-run", float(nonspace), f"flood of {fch!r} ({fshare:.0%} of {nonspace} characters)", True)
    toks = loop_tokens(layout)
    most, tail = longest_loop(toks)
    share = most.covered / max(1, len(toks))
    mostly = most.repeats >= 15 and share >= 0.6  # a short reply (max_tokens) that is mostly one loop
    unit = most.unit if len(most.unit) <= 60 else most.unit[:57] + "..."
    if most.repeats >= cs.max_repeat_run or mostly:
        return Signal("repeat-run", float(most.repeats), f"{unit!r} ({most.period} tokens) repeated {most.repeats} "
                      f"times in a row (>= {cs.max_repeat_run}" + (f", {share:.0%} of the reply)" if mostly else ")"),
                      True)
    tail_share = tail.covered / max(1, len(toks))
    if cut and tail.repeats >= 4 and tail_share >= 0.5:
        tu = tail.unit if len(tail.unit) <= 60 else tail.unit[:57] + "..."
        return Signal("repeat-run", float(tail.repeats), f"{tu!r} ({tail.period} tokens) repeated {tail.repeats} "
                      f"times up to the max_tokens cut ({tail_share:.0%} of the reply)", True)
    char = _char_repeat_signal(layout, cs, cut)
    if char is not None:
        return char
    return Signal("repeat-run", float(most.repeats), f"{unit!r} repeated {most.repeats} times in a row "
                  f"(>= {cs.max_repeat_run})", False)


def _char_repeat_signal(layout: str, cs: ClassifierSettings, cut: bool) -> Signal | None:
    """``repeat-run`` at the granularity of characters (issue 37): the rules of the token loop
    (:func:`_repeat_signal`: >= ``max_repeat_run`` repeats, or >= 15 repeats covering >= 60 % of
    the reply, or -- cut by ``max_tokens`` -- >= 4 repeats running into the cut and covering
    >= half of it) applied to back-to-back repeats of one character string
    (:func:`~bisectbot.reproduce.rawtext.char_loop`), so a loop inside one token
    (``microsecondmicrosecond...``) or with no separator at all is judged as a word loop is.
    No new constant: a unit that is a whole word with a separator repeats as often at both
    granularities, so the token rule's limits carry over unchanged (healthy text -- lists, code,
    CSV -- varies at least one character per item; rules and blank runs are skipped). Shares
    count characters. ``None`` when no loop is found."""
    most, tail = char_loop(layout)
    size = max(1, len(layout))
    share = most.covered / size
    unit = most.unit if len(most.unit) <= 60 else most.unit[:57] + "..."
    if most.repeats >= cs.max_repeat_run or (most.repeats >= 15 and share >= 0.6):
        return Signal("repeat-run", float(most.repeats), f"{unit!r} ({most.period} characters) repeated "
                      f"{most.repeats} times back to back (" + (f">= {cs.max_repeat_run}" if most.repeats >= cs.max_repeat_run
                                                 else f"{share:.0%} of the reply") + ")", True)
    tail_share = tail.covered / size
    if cut and tail.repeats >= 4 and tail_share >= 0.5:
        tu = tail.unit if len(tail.unit) <= 60 else tail.unit[:57] + "..."
        return Signal("repeat-run", float(tail.repeats), f"{tu!r} ({tail.period} characters) repeated "
                      f"{tail.repeats} times up to the max_tokens cut ({tail_share:.0%} of the reply)", True)
    return None


def classify(reply: Reply, spec: ReproducerSpec, needles: list[str]) -> Classification:
    """Classify one reply to a prompt built for ``spec`` with ``needles`` embedded.

    ``ERROR``: the request failed (``reply.error``; an over-limit rejection says
    "over the limit"). ``INCONCLUSIVE``: cut off by ``max_tokens`` inside the reasoning
    and the reasoning itself looks sane, or the answer is only in the reasoning
    (``misrouted``). ``GARBAGE``: any strong flagged signal (see the module docstring).
    Else ``OK``. Pure function, no I/O; never raises for odd field types.
    """
    cs = spec.classifier
    if reply.error is not None:
        note = reply.error if reply.error_kind != "over-limit" else f"over the limit: {reply.error}"
        return Classification(Outcome.ERROR, [], note)
    content = reply.content if isinstance(reply.content, str) else ""
    reasoning = reply.reasoning if isinstance(reply.reasoning, str) else ""
    text = (reasoning + "\n" + content).strip()
    no_content = not content.strip()
    reported = reply.completion_tokens if isinstance(reply.completion_tokens, int) and \
        not isinstance(reply.completion_tokens, bool) and reply.completion_tokens >= 0 else None
    cut = reply.finish_reason == "length"
    signals = text_signals(text, cs, cut) if text else []
    blank = blank_signal(content, reasoning, reported, cut)
    signals.append(blank)
    collapse = any(s.strong for s in signals)
    if no_content and not collapse:
        odd = _not_an_answer(reply)
        if odd is not None:
            return odd
    if reply.finish_reason == "content_filter" and not collapse:
        # the filter cut the reply short: missing needles or answer are the filter's doing, not evidence
        return Classification(Outcome.ERROR, [Signal("refused", 0.0, "finish_reason 'content_filter'", False)],
                              "refused: the server's content filter cut the reply short (finish_reason "
                              "'content_filter'); not evidence of corruption")
    if not text:
        return Classification(Outcome.GARBAGE, [Signal("empty", 0.0, "empty reply (no content, no reasoning)", True),
                                                blank])
    if no_content and not collapse:
        if cut:
            return Classification(Outcome.INCONCLUSIVE, signals,
                                  "cut off by max_tokens inside the reasoning; raise max_tokens")
        if not cs.accept_reasoning and _correct(reasoning, spec, needles, cs)[0]:
            return Classification(Outcome.INCONCLUSIVE, signals + [Signal("misrouted", 0.0, "", False)],
                                  "misrouted: the answer is only in reasoning_content (content empty, finish "
                                  f"{reply.finish_reason!r}): a reasoning-parser routing fault, not corruption; "
                                  "set classifier.accept_reasoning to judge the reasoning as the answer")
    answer = content if not no_content else text
    if no_content and not cs.accept_reasoning:
        signals.append(Signal("empty", 0.0, "empty reply: no content after the reasoning", True))
    checked, answer_signals = _correct(answer, spec, needles, cs)[1:]
    signals.extend(answer_signals)
    if checked:
        signals.append(tail_signal(answer, spec.expected_answer, needles, cs))
    ntok = reported if reported is not None else len(_TOKEN.findall(text))
    signals.append(Signal("too-short", float(ntok), f"{ntok} completion tokens (< {cs.min_reply_tokens})",
                          ntok < cs.min_reply_tokens, weak=checked))
    if cut and not collapse and not any(s.strong for s in signals if s.classifier not in ANSWER_CHECKS):
        missing = [s.classifier for s in signals if s.strong]
        fw, nwords = function_word_share(" ".join(_THINK_TAG.sub(" ", answer).split()))
        if missing and nwords >= 20 and fw >= cs.function_word_share_min:  # prose, as the salad check reads it
            think = "thinking in <think> tags" if _THINK_OPEN.search(answer) else "fluent text"
            return Classification(Outcome.INCONCLUSIVE, signals,
                                  f"cut before answering: {think} cut by max_tokens (finish 'length', {ntok} "
                                  f"completion tokens) with no answer yet ({', '.join(missing)}) and no collapse "
                                  "signal -- a model thinking in content, not corruption; raise max_tokens")
    if any(s.strong for s in signals):
        return Classification(Outcome.GARBAGE, signals)
    return Classification(Outcome.OK, signals)


#: Signals that say the answer is missing or short -- not that the text collapsed. A reply cut by
#: ``max_tokens`` with only these flagged, that reads as prose (>= 20 words, a function-word share
#: of at least ``function_word_share_min``: the salad check's own measure, thinking tags and line
#: breaks ignored), is "cut before answering" (issue 37): ``INCONCLUSIVE``, asked again with more room.
ANSWER_CHECKS = ("known-answer", "needles", "too-short", "empty", "tail-salad")
#: An opening thinking marker of reasoning models served without a reasoning parser.
_THINK_OPEN = re.compile(r"<(?:think|thinking|reasoning)>", re.IGNORECASE)
_THINK_TAG = re.compile(r"</?(?:think|thinking|reasoning)>", re.IGNORECASE)


#: A run of blank characters (whitespace, ``Cf``) at least this long is a flood: indentation
#: and blank lines of code, poems and ASCII art stay far below (tests/data: longest 48).
BLANK_RUN_MAX = 120
#: ... or with at least this many line breaks in one run (code and prose: at most 4 in a row).
BLANK_LINES_MAX = 24
#: Completion tokens per visible character from which the tokens went somewhere unseen
#: (English ~0.25, CJK ~1, emoji byte pieces ~3); weak: a server that hides the reasoning
#: but counts its tokens looks the same.
TOKENS_PER_VISIBLE_MAX = 4.0


def blank_signal(content: str, reasoning: str, completion_tokens: int | None, cut: bool) -> Signal:
    """``whitespace-flood`` on the raw reply (before any stripping): strong for a run of blank
    characters of >= :data:`BLANK_RUN_MAX` characters or >= :data:`BLANK_LINES_MAX` line breaks,
    or, in a reply cut by ``max_tokens``, for a run of >= 64 characters or >= 8 line breaks
    that runs into the cut; weak for >= :data:`TOKENS_PER_VISIBLE_MAX` completion tokens per
    visible character (>= 100 completion tokens) alone."""
    runs = [(longest_blank_run(t), t) for t in (content, reasoning) if t]
    run, where = max(runs, key=lambda rt: rt[0].chars, default=(longest_blank_run(""), ""))
    visible = visible_chars(content) + visible_chars(reasoning)
    per_char = completion_tokens / max(1, visible) if completion_tokens is not None else 0.0
    at_cut = cut and run.chars and run.start + run.chars == len(where)
    strong = run.chars >= BLANK_RUN_MAX or run.line_breaks >= BLANK_LINES_MAX or \
        bool(at_cut and (run.chars >= 64 or run.line_breaks >= 8))
    dense = completion_tokens is not None and completion_tokens >= 100 and per_char >= TOKENS_PER_VISIBLE_MAX
    why = [f"a run of {run.chars} blank characters ({run.line_breaks} line breaks, mostly {run.char!r})"
           + (" up to the max_tokens cut" if at_cut else "")] if run.chars >= 16 else []
    if completion_tokens is not None and (dense or why):
        why.append(f"{completion_tokens} completion tokens for {visible} visible characters ({per_char:.1f} per "
                   "character" + (", finish 'length')" if cut else ")"))
    return Signal("whitespace-flood", float(run.chars), "; ".join(why), strong or dense, weak=not strong)


#: Words after the answer from which a tail without function words is salad on its own.
TAIL_WORDS_MIN = 10


def tail_signal(answer: str, expected: str | None, needles: list[str], cs: ClassifierSettings) -> Signal:
    """``tail-salad``: the text after the sentence that ends the answer (:func:`answer_end`)
    judged on its own. Prose words with a function-word share below ``function_word_share_min``
    are salad -- strong for >= :data:`TAIL_WORDS_MIN` words after an answer that itself has >= 2
    function words (it is written in a language :data:`_FUNCTION_WORDS` knows: a Vietnamese
    or Turkish reply has none of them anywhere), weak otherwise (>= 5 words). Lists, code and
    tables after the answer are not prose (:func:`function_word_share`)."""
    end = answer_end(answer, expected, needles)
    tail = answer[end:] if end is not None else ""
    fw, nwords = function_word_share(tail)
    known = end is not None and sum(w.lower() in _FUNCTION_WORDS for w in _WORD.findall(answer[:end])) >= 2
    flagged = nwords >= 5 and fw < cs.function_word_share_min
    excerpt = " ".join(tail.split()[:6])
    return Signal("tail-salad", round(fw, 3), f"{nwords} words after the answer, {fw:.0%} function words "
                  f"(< {cs.function_word_share_min:.0%}): {excerpt!r}...", flagged,
                  weak=nwords < TAIL_WORDS_MIN or not known)


#: ``finish_reason`` values of a request the server gave up on (vLLM ``abort``, gateways ``error``).
ABORT_FINISH = ("abort", "aborted", "error", "cancelled")


def _not_an_answer(reply: Reply) -> Classification | None:
    """The verdict on a reply without content that is a routing, refusal or server fault rather
    than prefill corruption (issue 11, kind 3), or ``None``:

    * tool/function calls instead of content (``finish_reason`` ``tool_calls`` /
      ``function_call``, or ``message.tool_calls``): ``INCONCLUSIVE``, ``misrouted: tool call``;
    * a refusal (``finish_reason`` ``content_filter`` or ``message.refusal``): ``ERROR``,
      ``refused: ...`` -- the server declined, the prefill is not shown broken;
    * a request the server aborted (:data:`ABORT_FINISH`): ``ERROR``;
    * cut off by ``max_tokens`` before any visible text (``finish_reason`` ``length``, no
      content, no reasoning): ``INCONCLUSIVE`` -- a hidden reasoning or a too small
      ``max_tokens``, not word salad (the probe asks once more with more room).
    """
    finish = reply.finish_reason if isinstance(reply.finish_reason, str) else None
    calls = reply.tool_calls if isinstance(reply.tool_calls, int) and not isinstance(reply.tool_calls, bool) else 0
    refusal = reply.refusal.strip() if isinstance(reply.refusal, str) else ""
    if finish == "content_filter" or refusal:
        why = f"message.refusal {refusal[:120]!r}" if refusal else "finish_reason 'content_filter'"
        return Classification(Outcome.ERROR, [Signal("refused", 0.0, why, False)],
                              f"refused: the server refused to answer ({why}); not evidence of corruption")
    if calls or finish in ("tool_calls", "function_call"):
        return Classification(Outcome.INCONCLUSIVE, [Signal("misrouted", float(calls), "tool call", False)],
                              f"misrouted: tool call (content empty, {calls} tool call(s), finish {finish!r}): "
                              "the answer went to a tool call, a request/template routing fault, not corruption")
    if finish in ABORT_FINISH:
        return Classification(Outcome.ERROR, [], f"aborted: the server ended the request (finish_reason {finish!r})")
    if finish == "length" and not (reply.reasoning or "").strip():
        ntok = reply.completion_tokens
        return Classification(Outcome.INCONCLUSIVE, [],
                              f"cut off by max_tokens before any visible text ({ntok} completion tokens, no "
                              "content, no reasoning): reasoning hidden by the server or max_tokens too small; "
                              "raise max_tokens")
    return None


def _correct(answer: str, spec: ReproducerSpec, needles: list[str],
             cs: ClassifierSettings) -> tuple[bool, bool, list[Signal]]:
    """(correct, checked, signals) of the answer checks: ``checked`` when the recipe has an
    expected answer or needles; ``correct`` when every check passes."""
    out: list[Signal] = []
    if spec.expected_answer:
        ok = answer_present(spec.expected_answer, answer)
        out.append(Signal("known-answer", 1.0 if ok else 0.0, f"expected answer {spec.expected_answer!r} missing",
                          not ok))
    if needles:
        found = [n for n in needles if n in answer]
        score = len(found) / len(needles)
        missing = [n for n in needles if n not in found]
        detail = []
        for n in missing:
            near = _needle_near_miss(n, answer)
            detail.append(f"{n} answered as {near}" if near else f"{n} missing")
        out.append(Signal("needles", round(score, 3), f"retrieved {len(found)}/{len(needles)} needles: "
                          + ", ".join(detail), score < cs.needle_recall_min))
    checked = bool(out)
    return checked and not any(s.flagged for s in out), checked, out


def classic_unique_ratio(reply: Reply, min_ratio: float = 0.15, min_tokens: int = 10) -> Outcome:
    """The classic hand-reproducer check alone: OK iff unique-word ratio > ``min_ratio``
    and at least ``min_tokens`` completion tokens (the baseline of ``benchmarks/classifier.py``)."""
    if reply.error is not None:
        return Outcome.ERROR
    text = ((reply.reasoning or "") + "\n" + (reply.content or "")).strip()
    words = _WORD.findall(text)
    ntok = reply.completion_tokens if reply.completion_tokens is not None else len(_TOKEN.findall(text))
    return Outcome.OK if unique_ratio(words) > min_ratio and words and ntok >= min_tokens else Outcome.GARBAGE


#: Start of the reason of a size whose streamed reply differs from its unstreamed one (issue 37, input 8).
STREAM_DIVERGES = "streamed reply differs from the unstreamed one"


def _around(text: str, at: int, width: int = 24) -> str:
    """``text`` around character ``at`` (``width`` characters each side), on one line, quoted."""
    lo, hi = max(0, at - width), min(len(text), at + width)
    return ("…" if lo else "") + repr(text[lo:hi]) + ("…" if hi < len(text) else "")


def stream_divergence(unstreamed: Reply, streamed: Reply) -> str | None:
    """The reason of a ``GARBAGE`` finding when the greedy reply to one prompt came out different
    streamed and unstreamed (same server, same seed): ``"streamed reply differs from the unstreamed
    one: reasoning/content differs from character N: streamed '…' vs unstreamed '…'"``; ``None``
    when both texts (reasoning and content, compared exactly) agree. Streaming runs code the
    unstreamed path skips (delta emission, incremental detokenization, the stop-string hold-back;
    vllm#45636), so with the same sampled tokens the two texts must be equal."""
    for part in ("reasoning", "content"):
        a, b = getattr(unstreamed, part) or "", getattr(streamed, part) or ""
        if a == b:
            continue
        at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        return (f"{STREAM_DIVERGES}: {part} differs from character {at} ({len(b)} characters streamed, {len(a)} "
                f"unstreamed): streamed {_around(b, at)} vs unstreamed {_around(a, at)}")
    return None
