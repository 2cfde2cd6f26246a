"""Issue 39: one sample of a measured-value reproducer, and the rank-test rules on samples.

Kind: *a number read from a candidate's output*. Members: a bare number, text above it, a JSON
object (the named key, the only key, an ambiguous or missing key, a key that is not a number), no
output, a non-finite number, control characters in what is quoted back.
"""

from __future__ import annotations

import random

import pytest

from bisectbot.models import Verdict
from bisectbot.reproduce.measure import MeasureError, parse_sample
from bisectbot.verdict.measured import compare, decide, decide_end


@pytest.mark.parametrize("out, metric, want", [
    ("17.67\n", None, (17.67, "value")),
    ("warming up\n3 requests\n\n  1e3  \n\n", None, (1000.0, "value")),
    ("42\n", "tok_per_s", (42.0, "tok_per_s")),
    ('{"tok_per_s": 20.13, "ttft_ms": 210, "model": "x"}\n', "ttft_ms", (210.0, "ttft_ms")),
    ('{"tok_per_s": 20.13, "model": "x", "ok": true}\n', None, (20.13, "tok_per_s")),
])
def test_a_sample_is_the_last_line(out, metric, want) -> None:
    assert parse_sample(out, metric) == want


@pytest.mark.parametrize("out, metric, says", [
    ("", None, "printed nothing"),
    ("\n  \n", None, "printed nothing"),
    ("throughput: 17.6\n", None, "neither a number nor a JSON object"),
    ("[1, 2]\n", None, "not an object"),
    ('{"a": 1, "b": 2}\n', None, "2 numeric keys"),
    ('{"a": 1}\n', "b", 'no key "b"'),
    ('{"a": "fast"}\n', "a", "is not a number"),
    ('{"a": true}\n', "a", "is not a number"),
    ("nan\n", None, "not a finite number"),
    ('{"a": Infinity}\n', "a", "not a finite number"),
])
def test_output_without_a_number_says_what_it_printed(out, metric, says) -> None:
    with pytest.raises(MeasureError, match=says):
        parse_sample(out, metric)


def test_what_is_quoted_back_is_escaped_and_cut() -> None:
    with pytest.raises(MeasureError) as e:
        parse_sample("\x1b]8;;http://x\x07click\x1b[2J" + "y" * 500 + "\n")
    msg = str(e.value)
    assert "\x1b" not in msg and "\x07" not in msg and len(msg) < 200


def _draw(rng: random.Random, mean: float, n: int, sigma: float = 0.06) -> list[float]:
    return [mean * (1 + sigma * rng.gauss(0, 1)) for _ in range(n)]


@pytest.mark.parametrize("better, good_mean, bad_mean", [("higher", 100, 82), ("lower", 50, 100)])
def test_a_candidate_with_one_end_is_judged_with_it(better, good_mean, bad_mean) -> None:
    rng = random.Random(1)
    g, b = _draw(rng, good_mean, 10), _draw(rng, bad_mean, 10)
    d, comps = decide(_draw(rng, bad_mean, 10), g, b, better, 0.01, final=False)
    assert d.verdict is Verdict.BAD and comps["vs_good"]["p"] < 0.01 and comps["vs_good"]["worse"]
    d, comps = decide(_draw(rng, good_mean, 10), g, b, better, 0.01, final=False)
    assert d.verdict is Verdict.GOOD and comps["vs_bad"]["p"] < 0.01


def test_a_value_between_the_ends_draws_more_then_is_a_skip() -> None:
    rng = random.Random(2)
    g, b = _draw(rng, 100, 10, 0.01), _draw(rng, 80, 10, 0.01)
    mid = _draw(rng, 90, 10, 0.01)
    assert decide(mid, g, b, "higher", 0.01, final=False)[0].verdict is None
    d = decide(mid, g, b, "higher", 0.01, final=True)[0]
    assert d.verdict is Verdict.SKIP and "between" in d.reason


@pytest.mark.parametrize("better, good_mean, bad_mean, outside, beyond", [
    ("higher", 100, 80, 300, "beyond the good end"),  # CI, issue 39's lane test: the host sped up
    ("higher", 100, 80, 20, "beyond the bad end"),
    ("lower", 50, 100, 10, "beyond the good end"),
    ("lower", 50, 100, 400, "beyond the bad end"),
])
def test_a_value_outside_both_ends_is_a_skip_that_says_beyond_not_between(
        better, good_mean, bad_mean, outside, beyond) -> None:
    rng = random.Random(4)
    g, b = _draw(rng, good_mean, 10, 0.01), _draw(rng, bad_mean, 10, 0.01)
    d = decide(_draw(rng, outside, 10, 0.01), g, b, better, 0.01, final=True)[0]
    assert d.verdict is Verdict.SKIP and beyond in d.reason and "(a value between" not in d.reason


def test_identical_samples_have_no_rank_information() -> None:
    c = compare([5.0] * 10, [5.0] * 10)
    assert c.p == 1.0 and c.shift_pct == 0.0
    d = decide([5.0] * 10, [5.0] * 10, [5.0] * 10, "higher", 0.01, final=True)[0]
    assert d.verdict is Verdict.SKIP and "either end" in d.reason


def test_the_second_end_must_move_the_right_way() -> None:
    rng = random.Random(3)
    bad = _draw(rng, 82, 10)
    assert decide_end(_draw(rng, 100, 10), bad, False, "higher", 0.01, False)[0].verdict is Verdict.GOOD
    d = decide_end(_draw(rng, 70, 10), bad, False, "higher", 0.01, False)[0]  # the good end is slower
    assert d.verdict is Verdict.BAD and "wrong way" in d.reason
    assert decide_end(_draw(rng, 82, 10), bad, False, "higher", 0.01, False)[0].verdict is None
    d = decide_end(_draw(rng, 82, 30), bad, False, "higher", 0.01, True)[0]
    assert d.verdict is Verdict.BAD and "nothing to bisect" in d.reason


def test_noise_alone_never_gives_a_verdict_against_the_other_end() -> None:
    """Two-sided by construction: a candidate of the good end's distribution is never judged bad
    over 2,000 draws at sigma 6 % and an 18 % step (it would need to look unlike its own end and
    like the other at once)."""
    rng = random.Random(4)
    g, b = _draw(rng, 100, 10), _draw(rng, 82, 10)
    for _ in range(2000):
        d = decide(_draw(rng, 100, 10), g, b, "higher", 0.01, final=True)[0]
        assert d.verdict is not Verdict.BAD


_BASE = """\
name: speed
source: {kind: git, repo: /tmp/x}
regress: slower
reproducer:
  kind: command
  command: [python, bench.py]
"""


@pytest.mark.parametrize("extra, line, says", [
    ("  measure: {samples: 10, max_samples: 5}\n", 7, "max_samples (5) is below samples (10)"),
    ("  repeats: 3\n", 7, "draws samples, not repeats"),
    ("  measure: {samples: 4}\n", 7, "cannot reach p < 0.01: the smallest two-sided p of a rank test of 4 against 4 "
     "is 0.029; set samples to at least 5"),
    ("  measure: {samples: 5, alpha: 0.005}\n", 7, "set samples to at least 6"),
    ("bisect: {drift: true}\n", 7, "drift follows a threshold"),
])
def test_a_measured_recipe_that_cannot_run_is_refused_with_its_line(extra, line, says) -> None:
    from bisectbot.recipe import RecipeError, parse_recipe

    with pytest.raises(RecipeError) as e:
        parse_recipe(_BASE + extra, "r.yaml")
    assert says in str(e.value) and f"r.yaml:{line}:" in str(e.value), str(e.value)


@pytest.mark.parametrize("text, says", [
    (_BASE.replace("kind: command", "kind: prefill").replace("  command: [python, bench.py]\n", ""),
     "measures a number: set reproducer.kind: load"),
    (_BASE.replace("bench.py]", "bench.py, '{size}']"), "searches no threshold"),
    (_BASE.replace("regress: slower", "regress: command") + "  measure: {samples: 5}\n", "needs 'regress: slower'"),
])
def test_measured_fields_that_do_not_fit_the_regress_mode(text, says) -> None:
    from bisectbot.recipe import RecipeError, parse_recipe

    with pytest.raises(RecipeError, match=says):
        parse_recipe(text, "r.yaml")


def test_the_defaults_are_filled_and_hashed() -> None:
    from bisectbot.recipe import parse_recipe

    r = parse_recipe(_BASE, "r.yaml")
    assert r.reproducer.measure is not None and r.reproducer.measure.samples == 10
    other = parse_recipe(_BASE + "  measure: {samples: 12}\n", "r.yaml")
    assert r.verdict_hash() != other.verdict_hash()


@pytest.mark.parametrize("out", ['{"v": ' + "9" * 400 + "}\n", "1.7e308\n", "-1e308\n"])
def test_a_number_no_median_can_be_taken_of_is_refused(out) -> None:
    with pytest.raises(MeasureError, match="not a finite number"):
        parse_sample(out, "v" if out.startswith("{") else None)


def test_a_last_line_cut_by_the_runner_says_so() -> None:
    line = '{"per_request": [' + ", ".join(["1.25"] * 2000) + '], "tok_per_s": 17.5}'
    with pytest.raises(MeasureError, match="longer than the 4000 characters kept"):
        parse_sample(line[-4000:], "tok_per_s", tail_limit=4000)
