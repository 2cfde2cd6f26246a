"""Issue 40: a verification start only where the run does not already hold two agreeing
measurements of the role's build (:meth:`bisectbot.bisect.Bisection.measured_before`), the
reference's start shared by a probe of the same build (:func:`bisectbot.reproduce.oracle.reference_start`),
and stage 1's verification left to the commit stage's ends (:mod:`bisectbot.session.stages.settle`).

Members of the kind "a re-probe that measures what the run already measured twice": the role is the
predecessor or the culprit, the earlier measurement agrees or disagrees, the culprit sits next to the
good end or deeper, the range is short or long."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bisectbot.bisect import Bisection
from bisectbot.models import Candidate, CandidateKind, ProbeResult, StageResult, Status, Verdict
from bisectbot.reproduce.oracle import Oracle, reference_start
from bisectbot.session.stages.settle import _confirms

from .test_search import drive, exact_oracle

G, B = Verdict.GOOD, Verdict.BAD


@pytest.mark.parametrize("n", [2, 3, 5, 20, 100])
def test_a_predecessor_measured_before_and_again_here_is_not_re_probed(n: int) -> None:
    """The culprit next to the good end: the good end (index 0) is the predecessor; measured good
    before this search and good at its boundary probe, only the culprit is re-probed."""
    b = Bisection(n)
    b.measured_before(0, G)
    drive(b, exact_oracle(1))
    r = b.result()
    assert r.status is Status.CULPRIT and r.first_bad == 1 and r.verified
    verify = [st.index for st in b.history if st.phase == "verify"]
    assert verify == [1], b.history


@pytest.mark.parametrize("n", [3, 20, 100])
def test_without_the_earlier_measurement_both_roles_are_re_probed(n: int) -> None:
    b = Bisection(n)
    drive(b, exact_oracle(1))
    assert sorted(st.index for st in b.history if st.phase == "verify") == [0, 1]


def test_an_earlier_measurement_that_disagrees_saves_nothing() -> None:
    """Measured bad before, good here: two measurements that disagree are no verification."""
    b = Bisection(10)
    b.measured_before(0, B)
    drive(b, exact_oracle(1))
    assert sorted(st.index for st in b.history if st.phase == "verify") == [0, 1]


@pytest.mark.parametrize("first_bad", [2, 5, 9])
def test_a_deeper_culprit_re_probes_both_roles(first_bad: int) -> None:
    """The earlier measurement is of the good end; a predecessor inside the range was measured once."""
    b = Bisection(10)
    b.measured_before(0, G)
    drive(b, exact_oracle(first_bad))
    r = b.result()
    assert r.first_bad == first_bad and r.verified
    assert sorted(st.index for st in b.history if st.phase == "verify") == [first_bad - 1, first_bad]


def test_the_culprit_measured_before_and_here_needs_no_re_probe_either() -> None:
    b = Bisection(2)
    b.measured_before(0, G)
    b.measured_before(1, B)
    drive(b, exact_oracle(1))
    assert b.result().verified and not [st for st in b.history if st.phase == "verify"]


def test_measured_before_refuses_an_index_outside_the_range() -> None:
    with pytest.raises(ValueError, match="outside"):
        Bisection(3).measured_before(3, G)


def _oracle(ref: str = "N1", key: str = "img@sha256:1") -> Oracle:
    return Oracle(client=None, noise=None, label="ref", serves=ref, serves_key=key, prepared=SimpleNamespace(),
                  base_url="http://127.0.0.1:1")


@pytest.mark.parametrize("ref,key,attempt,toggled,shared", [
    ("N1", "img@sha256:1", 1, False, True),   # the reference's build, first attempt: its start
    ("N1", "img@sha256:1", 2, False, False),  # a verification re-probe: a start of its own
    ("N1", "img@sha256:2", 1, False, False),  # same ref, another build (a rebuilt image)
    ("N2", "img@sha256:1", 1, False, False),  # another candidate
    ("N1", "img@sha256:1", 1, True, False),   # a triage toggle changes the server
])
def test_a_probe_shares_the_reference_start_only_for_its_build_and_first_attempt(ref, key, attempt, toggled,
                                                                                  shared) -> None:
    o = _oracle()
    assert (reference_start(o, ref, key, attempt, toggled) is o) is shared
    assert reference_start(None, ref, key, attempt, toggled) is None
    assert reference_start(Oracle(None, None, "endpoint"), ref, key, attempt, toggled) is None


def _cand(ref: str, **meta) -> Candidate:
    return Candidate(CandidateKind.COMMIT, ref, ref, "vllm", meta)


def _probe(c: Candidate, v: Verdict, **extra) -> ProbeResult:
    return ProbeResult(c, v, extra=dict(extra))


def _stage1() -> StageResult:
    n2 = Candidate(CandidateKind.NIGHTLY, "sha256:n2", "N2", "", {"image": "reg/vllm@sha256:n2"})
    n3 = Candidate(CandidateKind.NIGHTLY, "sha256:n3", "N3", "", {"image": "reg/vllm@sha256:n3"})
    return StageResult("stage 1", "", Status.CULPRIT, [n2, n3], last_good=n2, first_bad=n3)


@pytest.mark.parametrize("good_meta,good_v,bad_v,cached,ok", [
    ({"base": "reg/vllm@sha256:n2", "base_commit": "c2"}, G, B, False, True),
    ({"base": "reg/vllm@sha256:n2", "base_commit": "c1"}, G, B, False, False),  # not an empty overlay
    ({"base": "reg/vllm@sha256:n3", "base_commit": "c2"}, G, B, False, False),  # on another image
    ({"base": "reg/vllm@sha256:n2", "base_commit": "c2"}, B, B, False, False),  # the good end is bad
    ({"base": "reg/vllm@sha256:n2", "base_commit": "c2"}, G, G, False, False),  # the bad end is good
    ({"base": "reg/vllm@sha256:n2", "base_commit": "c2"}, G, B, True, False),   # from the ledger cache
])
def test_the_commit_stage_verifies_stage_1_only_with_fresh_agreeing_ends_on_the_last_good(
        good_meta, good_v, bad_v, cached, ok) -> None:
    good = _cand("c2", **good_meta)
    bad = _cand("c4", base="reg/vllm@sha256:n2", base_commit="c2")
    mark = {"cached": {"measured_at": "2026-12-01T00:00:00Z", "session": "s"}} if cached else {}
    later = StageResult("vllm commits", "vllm", Status.CULPRIT, [good, _cand("c3"), bad],
                        probes=[_probe(bad, bad_v, **mark), _probe(good, good_v, **mark)])
    assert _confirms(_stage1(), later) is ok
