"""Issue 40 (hostile pass): the dry-run's time estimate is made of durations some probe took.

Kind: *an estimate computed from stored numbers that no clock measured*. Members: an infinite, a NaN, a
negative, a zero and a non-number duration beside a measured one (none counts), and an absurd finite one
beside measured ones (the lower middle of them is a measured duration: one odd row among two moved the
estimate halfway to it)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bisectbot.ledger import Ledger
from bisectbot.models import Candidate, CandidateKind, ProbeResult, Verdict
from bisectbot.provenance import HOST_KEY, SESSION_KEY, host_facts
from bisectbot.session.estimate import estimate


def _ledger(tmp_path: Path, durations: list) -> Ledger:
    led = Ledger(tmp_path / "ledger.db")
    led.save_session("s1", "r", "h", "g", "b", "done", {})
    for i, d in enumerate(durations):
        res = ProbeResult(Candidate(CandidateKind.COMMIT, f"{i:040x}"), Verdict.GOOD, duration_s=d,
                          extra={SESSION_KEY: "s1", HOST_KEY: host_facts("default")})
        res.cache_key = f"k{i}"
        led.put_probe(res)
    return led


@pytest.mark.parametrize("odd", [math.inf, -math.inf, math.nan, -5.0, 0.0])
def test_a_duration_no_clock_measured_is_no_measurement(tmp_path: Path, odd: float) -> None:
    e = estimate(_ledger(tmp_path, [600.0, odd]), "r", "default", 9)
    assert e.measured == 1 and e.per_probe_s == 600.0 and e.total_s == 5400.0, e.line()


def test_an_odd_row_among_measured_ones_does_not_move_the_estimate_to_it(tmp_path: Path) -> None:
    e = estimate(_ledger(tmp_path, [600.0, 1e300]), "r", "default", 9)
    assert e.per_probe_s == 600.0, e.line()
    e = estimate(_ledger(tmp_path / "b", [500.0, 600.0, 1e300]), "r", "default", 9)
    assert e.per_probe_s == 600.0 and "10 min each" in e.line(), e.line()


def test_a_finite_duration_whose_total_is_not_is_no_estimate(tmp_path: Path) -> None:
    """The re-check's member: one stored duration of 1e308 s is finite; times the probes it is not (the line
    read "~inf h" and --json wrote Infinity, which is no JSON)."""
    e = estimate(_ledger(tmp_path, [1e308]), "r", "default", 9)
    assert e.total_s is None and "no estimate" in e.line(), e.line()
