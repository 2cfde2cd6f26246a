"""Issue 37, item 1: repetition judged at every granularity.

A loop is GARBAGE whatever separates its units -- nothing (``microsecondmicrosecond``), a space,
a newline, punctuation, CJK -- and whatever the unit's length (a sub-word, a word, a line). The
CLI tests run ``bisectbot probe`` against a real engine process (``shape_engine.py``'s
``unit-loop``: the right answer and both needle codes, then the loop) from 8,000 prompt tokens;
on main (3832fe5) they end "OK: no garbage", because a loop inside one token is one word there.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bisectbot.models import Outcome
from bisectbot.recipe import ReproducerSpec
from bisectbot.reproduce.classify import classify
from bisectbot.reproduce.client import Reply
from tests.reproduce.shape_engine import start_shape_engine

PROBE = [sys.executable, "-m", "bisectbot", "--json", "probe"]
T = 8000
ANSWER = "2 plus 2 equals 4. "


def _probe(url: str, *args: str) -> tuple[int, dict]:
    p = subprocess.run(PROBE + ["--endpoint", url, "--min-size", "1000", "--max-size", "30000", "--needles", "2",
                                *args], capture_output=True, text=True, timeout=240)
    assert "Traceback" not in p.stderr, p.stderr
    assert p.stdout.strip(), p.stderr
    return p.returncode, json.loads(p.stdout)


@pytest.mark.parametrize("unit,repeats,cut", [
    ("microsecond", 29, False),  # the H200 reply of the issue: 11 characters, no separator
    ("ab", 60, False),  # 2 characters
    ("ation", 22, True),  # a sub-word, fewer than 25 repeats, running into the max_tokens cut
])
def test_loop_inside_one_token_is_garbage_through_the_cli(unit, repeats, cut):
    e = start_shape_engine("unit-loop", T, unit=unit, repeats=repeats, cut=cut)
    try:
        rc, res = _probe(e.url)
    finally:
        e.stop()
    assert rc == 1 and res["status"] == "garbage", (res["status"], res["table"][-1])
    assert res["last_ok"] < T <= res["first_garbage"]
    assert any(r.startswith("repeat-run") and "characters" in r for r in res["reasons"]), res["reasons"]


def test_a_degenerate_reference_is_unusable_through_the_cli():
    # candidate and reference both loop inside one token at every size: the comparison is empty of
    # information, so 'diverges' cannot say OK (main: "OK: no garbage up to ...", exit 0)
    cand = start_shape_engine("unit-loop", 0, unit="microsecond", repeats=40)
    ref = start_shape_engine("unit-loop", 0, unit="microsecond", repeats=40)
    try:
        rc, res = _probe(cand.url, "--reference-endpoint", ref.url, "--regress", "diverges", "--max-size", "8000")
    finally:
        cand.stop()
        ref.stop()
    assert res["status"] != "ok" and rc != 0, (res["status"], res["table"])
    assert any("reference unusable" in " ".join(row["reasons"]) for row in res["table"]), res["table"]


# --------------------------------------------------------------------------- the kind, unit by unit


def _outcome(text: str, cut: bool = False) -> tuple[Outcome, list[str]]:
    c = classify(Reply(content=text, finish_reason="length" if cut else "stop", completion_tokens=len(text) // 4),
                 ReproducerSpec(), [])
    return c.outcome, c.reasons


@pytest.mark.parametrize("unit", ["q", "zx", "tok", "microsecond", "Überschreitung", "abcdefghijklmnopqrstuvwxyz0123"])
@pytest.mark.parametrize("sep", ["", " ", "\n", ", ", ".", "; ", "、", "\u3000", "-"])
@pytest.mark.parametrize("repeats,cut", [(26, False), (16, False), (0, True)])
def test_a_loop_is_garbage_at_any_unit_separator_and_count(unit, sep, repeats, cut):
    if cut:  # the fewest repeats (>= 4) that cover half the reply, running into the max_tokens cut
        repeats = max(4, len(ANSWER) // len(unit + sep) + 1)
    text = ANSWER + (unit + sep) * repeats
    if unit == "q" and not sep and not cut and repeats < 20:
        pytest.skip("16 letters 'q' in a row: a spelling of a sound, below every limit on purpose")
    outcome, reasons = _outcome(text, cut)
    assert outcome == Outcome.GARBAGE, (text[:80], reasons)
    assert any(r.startswith("repeat-run") for r in reasons), reasons


def test_cjk_units_without_separators():
    for unit in ("微秒", "我们可以", "データ"):
        outcome, reasons = _outcome("2加2等于4。" + unit * 30)
        assert outcome == Outcome.GARBAGE, (unit, reasons)


@pytest.mark.parametrize("text", [
    ANSWER + "\n".join(f"    field_{i}: other.field_{i}," for i in range(30)),  # repetitive correct code
    ANSWER + "\n".join(f"{i},,,," for i in range(40)),  # CSV with empty cells
    ANSWER + "Hahaha! Hmmmmmm. Wheeeee! Zzzzz. Mississippi, bookkeeper, 1000000.",
    ANSWER + "ACGTTGCAAGCTAGCTAGGATCCGATCGATCGTAGCTAGCTAGCTAGCATCGATCGAT",  # a DNA string is not periodic
    ANSWER + "padding: AAAAAAAAAAAAAAAAAAAAAA== and 0x00000000",
    ANSWER + "\n| a | b |\n|---|---|\n" + "\n".join(f"| x{i} | y{i} |" for i in range(12)),
    ANSWER + "\n" + "-=" * 40 + "\nEnd.",  # a drawn rule of two characters: layout
    ANSWER + " " * 100 + "x",  # blank runs are the whitespace-flood's to judge
    ANSWER + "The the answer, answer is is four.",
])
def test_legitimate_repetition_is_not_a_loop(text):
    outcome, reasons = _outcome(text)
    assert outcome == Outcome.OK, reasons


def test_char_loop_measures_characters_and_keeps_the_unit_as_written():
    from bisectbot.reproduce.rawtext import char_loop

    most, tail = char_loop("SPACE z has" + "Microsecond" * 29)
    assert most.period == 11 and most.repeats == 29 and most.unit.lower() in ("microsecond" * 2)[0:22]
    assert tail.end == len("SPACE z has" + "Microsecond" * 29)
    most, _ = char_loop("x" + " " * 300 + "y")
    assert most.repeats == 1  # blank units skipped
