"""Issue 27: the text oracle's blind spots -- every failing input through `bisectbot probe`
against a real engine process that answers correctly below 8,000 prompt tokens and in the
issue's shape from there on (``tests/reproduce/shape_engine.py``: the reference engine with
its replies rewritten; the shape carries the right answer and every needle code)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.reproduce.shape_engine import start_shape_engine

PROBE = [sys.executable, "-m", "bisectbot", "--json", "probe"]
T = 8000


@pytest.fixture
def shape_engine():
    started = []

    def make(shape: str, **kw):
        e = start_shape_engine(shape, T, **kw)
        started.append(e)
        return e

    yield make
    for e in started:
        e.stop()


def _probe(url: str, *args: str) -> tuple[int, dict]:
    p = subprocess.run(PROBE + ["--endpoint", url, "--min-size", "1000", "--max-size", "30000", "--needles", "2",
                                *args], capture_output=True, text=True, timeout=240)
    assert "Traceback" not in p.stderr, p.stderr
    assert p.stdout.strip(), p.stderr
    return p.returncode, json.loads(p.stdout)


def _garbage_near_threshold(rc: int, res: dict, signal: str) -> None:
    assert rc == 1 and res["status"] == "garbage", (res["status"], res.get("reasons"), res["table"][-1])
    assert res["last_ok"] < T <= res["first_garbage"], (res["last_ok"], res["first_garbage"])
    assert (res["first_garbage"] - res["last_ok"]) / T <= 0.05
    assert any(r.startswith(signal) and not r.endswith("(weak)") for r in res["reasons"]), res["reasons"]
    below = [row for row in res["table"] if row["prompt_tokens"] < T]
    assert below and all(row["outcome"] == "OK" for row in below)


# ----------------------------------------------------------------------------- inputs 1, 2: detokenizer residue


@pytest.mark.parametrize("shape", ["sp-markers", "bpe-markers"])
def test_tokenizer_markers_left_in_the_text_are_garbage(shape_engine, shape):
    e = shape_engine(shape)
    rc, res = _probe(e.url)
    _garbage_near_threshold(rc, res, "detokenizer-residue")


# ----------------------------------------------------------------------------- input 3: whitespace floods


@pytest.mark.parametrize("unit", ["\n", " ", "\n\t"])
def test_whitespace_flood_after_a_correct_answer_is_garbage(shape_engine, unit):
    e = shape_engine("flood", flood=unit)
    rc, res = _probe(e.url)  # max_tokens 1000: the answer and both codes, then 985 units, finish length
    _garbage_near_threshold(rc, res, "whitespace-flood")
    bad = [row for row in res["table"] if row["prompt_tokens"] >= T]
    assert all(row["outcome"] == "GARBAGE" for row in bad)


# ----------------------------------------------------------------------------- input 4: a loop at any max_tokens


@pytest.mark.parametrize("max_tokens", ["200", "1000"])
def test_sentence_loop_after_a_correct_answer_is_garbage_at_small_max_tokens(shape_engine, max_tokens):
    e = shape_engine("loop")
    rc, res = _probe(e.url, "--max-tokens", max_tokens)
    _garbage_near_threshold(rc, res, "repeat-run")


# ----------------------------------------------------------------------------- input 5: salad after the answer


def test_salad_after_a_correct_answer_is_garbage(shape_engine):
    e = shape_engine("tail-salad")
    rc, res = _probe(e.url)
    _garbage_near_threshold(rc, res, "tail-salad")


# ----------------------------------------------------------------------------- input 6: non-ASCII rules are layout


def test_rules_drawn_with_non_ascii_formatting_characters_are_ok(shape_engine):
    e = shape_engine("unicode-rule")
    rc, res = _probe(e.url)
    assert rc == 0 and res["status"] == "ok", (res["status"], res.get("reasons"), res["table"][-1])
    top = max(res["table"], key=lambda row: row["prompt_tokens"])
    assert top["prompt_tokens"] > 20000 and top["outcome"] == "OK"


# ----------------------------------------------------------------------------- next members of the kinds


def test_loop_in_a_script_without_spaces_at_small_max_tokens_is_garbage(shape_engine):
    # next member of input 4: one Chinese clause repeated without punctuation is a single \w+ "word"
    e = shape_engine("cjk-loop")
    rc, res = _probe(e.url, "--max-tokens", "200")
    _garbage_near_threshold(rc, res, "repeat-run")


def test_text_decoded_with_the_wrong_codec_is_garbage(shape_engine):
    # next member of inputs 1-2: the answer's UTF-8 read as Windows-1252 ("equals â€“", "â€œPLOVER")
    e = shape_engine("mojibake")
    rc, res = _probe(e.url)
    _garbage_near_threshold(rc, res, "detokenizer-residue")


@pytest.mark.parametrize("unit", ["\u3000", "\u00a0"])
def test_flood_of_non_ascii_blanks_is_garbage(shape_engine, unit):
    # next member of input 3: ideographic / no-break spaces
    e = shape_engine("flood", flood=unit)
    rc, res = _probe(e.url)
    _garbage_near_threshold(rc, res, "whitespace-flood")


# ----------------------------------------------------------------------------- the signals' building blocks


def test_blank_pattern_covers_every_format_character_of_this_python():
    import unicodedata

    from bisectbot.reproduce.rawtext import _BLANKS

    missing = [hex(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf" and not _BLANKS.fullmatch(chr(c))]
    assert not missing, missing


@pytest.mark.parametrize("rule", ["━" * 30, "═" * 40, "—" * 20, "＊" * 10, "・" * 10, "〜" * 12, "― " * 8, "· · · · ·",
                                  "┌─────┬─────┐", "╚══════╩═════╝", "-----", "=====", "*****", "~~~~~", "#####",
                                  "✦ ✦ ✦", "////////", "+----+----+"])
def test_rules_of_any_script_are_layout(rule):
    from bisectbot.reproduce.rawtext import is_rule_line, layout_text

    assert is_rule_line(rule)
    assert layout_text(f"Answer\n{rule}\n2 + 2 = 4") == "Answer\n2 + 2 = 4"
    assert layout_text(f"Result {rule.replace(' ', '')} 4") == f"Result {rule.replace(' ', '')[0]} 4" or \
        len(set(rule.replace(" ", ""))) > 1


@pytest.mark.parametrize("flood", ["!" * 8, "," * 48, "?" * 30, "。" * 300, "─" * 900, "！" * 20])
def test_sentence_punctuation_and_overlong_runs_are_floods_not_rules(flood):
    from bisectbot.reproduce.rawtext import is_rule_line, layout_text

    assert not is_rule_line(flood)
    assert layout_text(flood) == flood


def test_loops_of_any_period_and_cut_inside_a_word():
    from bisectbot.reproduce.rawtext import longest_loop, loop_tokens

    sentence = " I hope this answer helps you understand the codes in the document."
    toks = loop_tokens("2 + 2 = 4." + sentence * 6 + " I hope this ans")
    most, tail = longest_loop(toks)
    assert most.period == 13 and most.repeats == 6
    assert tail.end == len(toks) and tail.period == 13  # "ans" is a prefix of "answer": it runs into the cut
    zh = loop_tokens("2加2等于4。" + "我们可以看到" * 5)
    assert longest_loop(zh)[0].repeats == 5 and longest_loop(zh)[0].period == 6


@pytest.mark.parametrize("text,kind", [
    ("FÃ¼r GrÃ¶ÃŸe â€“ itâ€™s", "mojibake"), ("ä½\xa0å¥½", "mojibake"), ("âĢĻ and âĢĵ", "mojibake"),
    ("▁Two▁plus▁two", "sp_marks"), ("TwoĠplusĠtwo.ĊThe", "bpe_marks"), ("<0x0A><0x0A><0xE4>", "byte_pieces")])
def test_detokenizer_residue_kinds(text, kind):
    from bisectbot.reproduce.rawtext import detokenizer_residue

    r = detokenizer_residue(text)
    assert getattr(r, kind) >= 2, r


@pytest.mark.parametrize("text", ["Żewġ u żewġ: 4. Ġimgħa t-tajba, Ġużeppi!", "İKİ ARTI İKİ: 4. SEÇİM, ÇİFT, ÇİN",
                                  "INFORMAÇÃO EM SÃO PAULO", "« À côté » — ¿Qué? ¡Sí! Ça fait 4", "▁▂▃▅▇▅▃ load",
                                  "Hai cộng hai bằng 4. Đây là phép cộng.", "Du plus du estas 4. Ĉiu scias ĉi tion.",
                                  "WRÓŁ, ŁÓDŹ, żółw"])
def test_letters_of_living_alphabets_are_not_residue(text):
    from bisectbot.reproduce.rawtext import detokenizer_residue

    r = detokenizer_residue(text)
    assert r.sp_marks + r.bpe_marks + r.byte_pieces + r.mojibake == 0, r


def test_tuning_part_has_issue_27_kinds():
    from benchmarks.classifier import DEFAULT_CORPUS, HELDOUT_CORPUS, load_corpus

    for corpus in (DEFAULT_CORPUS, HELDOUT_CORPUS):
        kinds = {c["kind"] for c in load_corpus(corpus)}
        for k in ("detokenizer-residue", "mojibake", "whitespace-flood", "sentence-loop", "tail-salad", "unicode-rule",
                  "box-table", "mentions-markers", "poem", "tail-list"):
            assert k in kinds, (corpus.name, k)
