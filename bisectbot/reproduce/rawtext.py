"""Statistics of a reply's raw text that word statistics miss (issue 27).

Pure functions on the text as the server sent it (whitespace kept), with no knowledge of
the question; :mod:`bisectbot.reproduce.classify` turns them into signals:

* :func:`detokenizer_residue` -- what a detokenizer left unfinished: SentencePiece word
  marks (``▁``), byte-level BPE space/newline marks (``Ġ``/``Ċ``), byte-fallback pieces
  (``<0x0A>``), and UTF-8 read with the wrong codec (``Ã¼``, ``â€™``, ``ä½ å¥½``).
* :func:`longest_blank_run` -- the longest run of blank characters (whitespace and
  invisible format characters, Unicode category ``Cf``: zero-width spaces, joiners, marks).
* :func:`layout_text` -- the text without its formatting rules: lines drawn with
  punctuation/symbol characters of any script (``━━━━``, ``══``, ``————``, ``＊＊＊``,
  ``・・・``, table borders ``┌──┬──┐``), judged by Unicode category and context, not by a list.
* :func:`loop_tokens` and :func:`longest_loop` -- back-to-back repeats of a token n-gram of
  any period (a word, a sentence, a paragraph); scripts written without spaces count one
  token per character.
"""

from __future__ import annotations

import operator
import re
import unicodedata
from collections import Counter
from typing import NamedTuple

#: A SentencePiece word mark (U+2581) that opens a word: ``▁Two▁plus``. One next to other
#: block elements (``▁▂▃▅``) is a bar chart, not a mark.
_SP_MARK = re.compile(r"\u2581(?=\w)")
#: GPT-2 byte-level BPE's space (U+0120 ``Ġ``) and newline (U+010A ``Ċ``) characters.
_BPE_MARKS = "\u0120\u010a"
_BPE_MARK = re.compile(f"[{_BPE_MARKS}]")
#: A word, with the byte-level BPE marks (letters to ``\\w``) as separators.
_WORD = re.compile(f"[^\\W{_BPE_MARKS}]+")
#: A SentencePiece byte-fallback piece, one byte as ``<0xNN>``.
_BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")
#: Unicode names of the sentence punctuation that a repeated run is a flood of, never a rule
#: (``!!!!``, ``,,,,``, ``。。。。``), in any script.
_SENTENCE_MARKS = ("EXCLAMATION", "QUESTION", "FULL STOP", "COMMA", "SEMICOLON", "COLON", "QUOTATION",
                   "APOSTROPHE")
#: Longest rule (characters) that is layout; a longer run of one character is a flood.
RULE_MAX_CHARS = 160
#: Characters of scripts written without spaces between words (CJK ideographs, kana, Thai,
#: Lao, Khmer, Myanmar): one loop token each.
_NO_SPACE = ("\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
             "\uff66-\uff9f")
_LOOP_TOKEN = re.compile(rf"[{_NO_SPACE}]|(?:(?![{_NO_SPACE}])\w)+|[^\w\s]", re.UNICODE)


def _byte_alphabet() -> dict[str, int]:
    """Character -> byte (0x80..0xFF) of the codecs that show UTF-8 bytes as characters: Latin-1,
    Windows-1252, and GPT-2's byte-level alphabet (bytes that are not printable Latin-1 shifted
    to U+0100..U+0143)."""
    out: dict[str, int] = {}
    for b in range(0x80, 0x100):
        out[chr(b)] = b
        try:
            out[bytes([b]).decode("cp1252")] = b
        except UnicodeDecodeError:
            pass
    shifted = [b for b in range(256) if not (0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF)]
    for n, b in enumerate(shifted):
        if b >= 0x80:
            out.setdefault(chr(0x100 + n), b)
    return out


_BYTES = _byte_alphabet()
_BYTE_RUN = re.compile("[" + "".join(re.escape(c) for c in _BYTES) + "]{2,}")


class Residue(NamedTuple):
    """Detokenizer residue in one text: counts of each kind, and the text's words."""

    sp_marks: int  #: ``▁`` opening a word
    bpe_marks: int  #: ``Ġ``/``Ċ`` right after a visible, non-capital character (not Maltese ``Ġ``)
    byte_pieces: int  #: ``<0xNN>`` pieces
    mojibake: int  #: UTF-8 characters shown as their bytes in another codec
    words: int  #: words (``\\w+`` runs, split at the BPE marks)
    example: str


def _mojibake(text: str) -> tuple[int, str]:
    """(count, example) of UTF-8 multi-byte characters shown as 2-4 characters of
    :data:`_BYTES`. A sequence counts only when one of its continuation bytes shows as a
    symbol or punctuation (``Ã¼``, ``â€™``), or, in a 3-4 byte sequence, all of them as GPT-2's
    shifted bytes (``âĢĻ`` for ``’``): two letters are how Turkish ``Çİ`` or Polish ``ÓŁ``
    are written."""
    count, example = 0, ""
    for m in _BYTE_RUN.finditer(text):
        run = m.group(0)
        raw = bytes(_BYTES[c] for c in run)
        i = 0
        while i < len(raw):
            b = raw[i]
            size = 2 if 0xC2 <= b <= 0xDF else 3 if 0xE0 <= b <= 0xEF else 4 if 0xF0 <= b <= 0xF4 else 0
            if size and i + size <= len(raw):
                try:
                    raw[i:i + size].decode("utf-8")
                except UnicodeDecodeError:
                    pass
                else:
                    tail = run[i + 1:i + size]
                    if any(not unicodedata.category(c).startswith("L") for c in tail) or \
                            (size >= 3 and all("\u0100" <= c <= "\u0143" for c in tail)):
                        count += 1
                        example = example or run[i:i + size]
                        i += size
                        continue
            i += 1
    return count, example


def misdecoded(text: str) -> str:
    """``text``'s UTF-8 bytes read as Windows-1252, bytes it leaves undefined as Latin-1 (``für``
    -> ``fÃ¼r``): what a server decoding with the wrong codec sends, the shape
    :func:`detokenizer_residue` counts as ``mojibake``. For corpora and tests."""
    out = []
    for b in text.encode("utf-8"):
        try:
            out.append(bytes([b]).decode("cp1252"))
        except UnicodeDecodeError:
            out.append(chr(b))
    return "".join(out)


def detokenizer_residue(text: str) -> Residue:
    """Counts of what a detokenizer left unfinished in ``text`` (see :class:`Residue`)."""
    sp = len(_SP_MARK.findall(text))
    bpe = sum(1 for m in _BPE_MARK.finditer(text) if m.start() and not text[m.start() - 1].isspace()
              and not text[m.start() - 1].isupper())
    pieces = _BYTE_PIECE.findall(text)
    moji, moji_ex = _mojibake(text)
    example = ("\u2581" if sp else "") or next((c for c in _BPE_MARKS if bpe and c in text), "") or \
        (pieces[0] if pieces else "") or moji_ex
    return Residue(sp, bpe, len(pieces), moji, len(_WORD.findall(text)), example)


#: The format characters (category ``Cf``) of Unicode 15.1, as regex ranges (scanning the whole
#: code space at import takes seconds); tests/reproduce/test_text_oracle.py checks that every
#: ``Cf`` character of the running Python's :mod:`unicodedata` is inside.
_CF_RANGES = ("\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
              "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
              "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f")
_BLANKS = re.compile(f"[\\s{_CF_RANGES}]+")


def is_blank(ch: str) -> bool:
    """Whitespace, or an invisible format character (category ``Cf``: U+200B zero-width space,
    joiners, direction marks, soft hyphen, U+FEFF)."""
    return ch.isspace() or unicodedata.category(ch) == "Cf"


class BlankRun(NamedTuple):
    """The longest run of :func:`is_blank` characters: length in characters, line breaks in it,
    where it starts, and its most frequent character."""

    chars: int
    line_breaks: int
    start: int
    char: str


def longest_blank_run(text: str) -> BlankRun:
    """The longest run of blank characters in ``text`` (whitespace and ``Cf``)."""
    m = max(_BLANKS.finditer(text), key=lambda m: len(m.group(0)), default=None)
    if m is None:
        return BlankRun(0, 0, 0, "")
    run = m.group(0)
    return BlankRun(len(run), run.count("\n") + run.count("\u2028"), m.start(), Counter(run).most_common(1)[0][0])


def visible_chars(text: str) -> int:
    """Characters of ``text`` that are not :func:`is_blank`."""
    return len(text) - sum(len(m.group(0)) for m in _BLANKS.finditer(text))


def is_rule_char(ch: str) -> bool:
    """A character rules and borders are drawn with, in any script: dash, connector, math,
    modifier or other symbol, or other punctuation (``*``, ``#``, ``・``, ``…``, ``⁂``) --
    but not sentence punctuation (:data:`_SENTENCE_MARKS`), whose runs are floods."""
    if unicodedata.category(ch) not in ("Pd", "Pc", "Po", "Sm", "So", "Sk"):
        return False
    name = unicodedata.name(ch, "")
    return not any(w in name for w in _SENTENCE_MARKS)


def is_rule_line(line: str) -> bool:
    """A line of its own drawn with rule characters: 3..:data:`RULE_MAX_CHARS` of them, spaces
    between allowed (``· · ·``), at most 6 distinct (a table border ``╔══╦══╗``)."""
    s = line.strip()
    marks = [c for c in s if not c.isspace()]
    return 3 <= len(marks) and len(s) <= RULE_MAX_CHARS and len(set(marks)) <= 6 and all(map(is_rule_char, marks))


_RUN = re.compile(r"(\S)\1{2,}")


def layout_text(text: str) -> str:
    """``text`` without its formatting: rule lines (:func:`is_rule_line`) dropped, and a run of
    one rule character inside a line (``Result ━━━━ 4``, dot leaders ``……``) shortened to one
    character, when at most :data:`RULE_MAX_CHARS` long. Floods (longer runs, sentence
    punctuation) are kept as they are."""
    lines = [ln for ln in text.split("\n") if not is_rule_line(ln)]
    out = "\n".join(lines)
    return _RUN.sub(lambda m: m.group(1) if is_rule_char(m.group(1)) and len(m.group(0)) <= RULE_MAX_CHARS
                    else m.group(0), out)


def loop_tokens(text: str) -> list[str]:
    """Lower-cased tokens for loop detection: words, single punctuation marks, and single
    characters of scripts written without spaces (:data:`_NO_SPACE`)."""
    return [t.lower() for t in _LOOP_TOKEN.findall(text)]


class Loop(NamedTuple):
    """Back-to-back repeats of one token n-gram: ``repeats`` whole units of ``period`` tokens
    (a partial last unit is in ``covered`` but not in ``repeats``), tokens ``start``..``end``."""

    repeats: int
    period: int
    start: int
    end: int
    unit: str

    @property
    def covered(self) -> int:
        """Tokens inside the loop."""
        return self.end - self.start


_NO_LOOP = Loop(1, 0, 0, 0, "")


def _periods(tokens: list[str], max_candidates: int) -> list[int]:
    """Periods worth scanning: 1..6 always, then the commonest distances between two
    occurrences of one token (a loop makes its period the commonest)."""
    last: dict[str, int] = {}
    dist: Counter[int] = Counter()
    for i, t in enumerate(tokens):
        j = last.get(t)
        if j is not None and i - j > 6:
            dist[i - j] += 1
        last[t] = i
    return list(range(1, 7)) + [p for p, c in dist.most_common(max_candidates) if c >= 2]


def longest_loop(tokens: list[str], max_candidates: int = 32) -> tuple[Loop, Loop]:
    """(the loop with the most repeats, the loop that reaches the end of ``tokens`` with the most
    tokens covered) over n-grams of any period. A last token that is a prefix of the token the
    loop expects (a reply cut inside a word) still reaches the end. ``tokens`` as from
    :func:`loop_tokens`; cost O(len(tokens) x (6 + max_candidates)), the inner scans in C."""
    n = len(tokens)
    index: dict[str, int] = {}
    ids = [index.setdefault(t, len(index)) for t in tokens]
    most, tail = _NO_LOOP, _NO_LOOP
    for p in _periods(tokens, max_candidates):
        if 2 * p > n:
            continue
        eq = bytes(map(operator.eq, ids, ids[p:]))  # eq[k]: token k + p repeats token k
        for m in re.finditer(b"\x01{%d,}" % p, eq):  # >= 2 repeats
            reps = len(m.group(0)) // p + 1
            if reps > most.repeats:
                end = m.end() + p
                most = Loop(reps, p, m.start(), end, " ".join(tokens[end - p:end]))
        run = len(eq) - len(eq.rstrip(b"\x01"))
        if not run and tokens[n - 1 - p].startswith(tokens[n - 1]):  # cut inside a word
            run = len(eq) - 1 - len(eq[:-1].rstrip(b"\x01"))
            run += 1 if run else 0
        if run >= p:
            start = n - p - run
            loop = Loop(run // p + 1, p, start, n, " ".join(tokens[start:start + p]))
            if loop.covered > tail.covered:
                tail = loop
    return most, tail


def _unit_counts(unit: str) -> bool:
    """A character unit worth judging as a loop: not only blank characters (whitespace floods
    are :func:`longest_blank_run`'s, with their own limits) and not only rule characters
    (:func:`is_rule_char`: ``-=-=-=``, ``·─·─`` are layout, :func:`layout_text`'s)."""
    return any(not is_blank(c) and not is_rule_char(c) for c in unit)


def char_loop(text: str, max_candidates: int = 32) -> tuple[Loop, Loop]:
    """Back-to-back repeats of one **character** string of any period in ``text`` (lower-cased):
    (the loop with the most repeats, the loop that reaches the end of ``text`` with the most
    characters covered), as :func:`longest_loop` over characters instead of tokens.

    A loop is the same at every granularity here (issue 37): a unit inside one token
    (``microsecondmicrosecond``, ``ingingingi``), a word with any separator or none (``word word``,
    ``word,word``, ``word\\nword``, ``词词词``), a line, a sentence. Units made only of blank
    characters or only of rule characters are skipped (:func:`_unit_counts`): those have their own
    judges. ``Loop.period``, ``start`` and ``end`` count characters; ``Loop.unit`` is the text
    unit as written. In the tail loop a last unit cut short (by ``max_tokens``, or its trailing
    separator stripped) counts as a repeat. Cost O(len(text) x (6 + max_candidates)), the inner scans in C."""
    chars = list(text.lower())
    n = len(chars)
    ids = [ord(c) for c in chars]
    most, tail = _NO_LOOP, _NO_LOOP
    for p in _periods(chars, max_candidates):
        if 2 * p > n:
            continue
        eq = bytes(map(operator.eq, ids, ids[p:]))
        for m in re.finditer(b"\x01{%d,}" % p, eq):
            reps = len(m.group(0)) // p + 1
            if reps > most.repeats:
                end = m.end() + p
                unit = text[end - p:end]
                if _unit_counts(unit):
                    most = Loop(reps, p, m.start(), end, unit)
        run = len(eq) - len(eq.rstrip(b"\x01"))
        if run >= p:
            start = n - p - run
            unit = text[start:start + p]
            loop = Loop(-(-(run + p) // p), p, start, n, unit)  # a last unit cut short counts: the reply ends in it
            if loop.covered > tail.covered and _unit_counts(unit):
                tail = loop
    return most, tail
