"""Pure parts of the oracles (issue 18): figures, tolerance, recipe fields."""

from __future__ import annotations

import pytest

from bisectbot.recipe import ReferenceSpec, parse_recipe
from bisectbot.reproduce.reference import Continuation, Noise, compare

BASE = "name: x\nsource: {kind: git, repo: .}\n"


def test_compare_reports_first_diverging_token_and_edit_distance():
    a = Continuation(text="It opens by saying that helper a_b_1234 returns int.")
    b = Continuation(text="It opens by saying that helper c_d_5678 returns int.")
    c = compare(a, b)
    assert c.first_divergence == 6 and 0 < c.edit_distance < 0.2
    assert compare(a, a).first_divergence is None and compare(a, a).edit_distance == 0.0
    short = compare(Continuation(text="one two"), Continuation(text="one two three"))
    assert short.first_divergence == 2  # one side stops early


def test_compare_prompt_logprobs_over_shared_token_ids():
    a = Continuation(text="x", prompt_logprobs=[None, {"7": {"logprob": -1.0}}, {"9": {"logprob": -2.0}}])
    b = Continuation(text="x", prompt_logprobs=[None, {"7": {"logprob": -1.5}}, {"8": {"logprob": -9.0}}])
    c = compare(a, b)
    assert c.logprob_positions == 1 and c.logprob_mean == pytest.approx(0.5)


def test_tolerance_is_margin_times_noise_at_the_next_calibrated_size_never_below_floors():
    spec = ReferenceSpec(endpoint="http://ref", margin=4, edit_distance_floor=0.2, logprob_floor=0.05)
    noise = Noise(edit={2000: 0.0, 8000: 0.1, 32000: 0.0}, logprob={2000: 0.002, 8000: 0.004, 32000: None})
    assert noise.tolerance(1000, spec).edit_distance == 0.2  # floor
    assert noise.tolerance(5000, spec).edit_distance == pytest.approx(0.4)  # 4 x 0.1 at 8000
    assert noise.tolerance(20000, spec).calibrated_at == 32000
    assert noise.tolerance(99999, spec).edit_distance == pytest.approx(0.4)  # beyond: the largest noise
    assert Noise().tolerance(5000, spec).edit_distance == 0.2 and not Noise().calibrated
    big = Noise(edit={2000: 0.0}, logprob={2000: 0.05})
    assert big.tolerance(2000, spec).logprob == pytest.approx(0.2)


@pytest.mark.parametrize("text", ["diverges", "[garbage, diverges]", "'garbage, diverges'", "[diverges, garbage]"])
def test_regress_diverges_forms(text):
    r = parse_recipe(BASE + "reproducer: {reference: {candidate: last-good}}\nregress: " + text + "\n")
    assert r.regress.mode == "diverges"
    assert str(r.regress) in ("diverges", "garbage, diverges")


def test_recipes_without_oracles_keep_their_verdict_hash():
    r = parse_recipe(BASE)
    fields = ("model", "tp", "server", "runner", "patches", "reproducer", "regress")
    data = r.model_dump(mode="json", include=set(fields))
    data["reproducer"].pop("reference")
    data["reproducer"].pop("control")
    data["reproducer"].pop("stream")  # later fields, absent from older recipes: their defaults keep the hash
    data["reproducer"].pop("measure")  # issue 39's, likewise
    data["reproducer"].pop("load")
    data["server"].pop("network")
    data["server"].pop("keyed_caches")  # issue 40's: caches keyed by content change no verdict
    import hashlib
    import json

    old = hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
    assert r.verdict_hash() == old
    with_ref = parse_recipe(BASE + "reproducer: {reference: {endpoint: 'http://ref:8000'}}\n")
    assert with_ref.verdict_hash() != old


def test_last_good_reference_needs_a_gpu_slot_beside_every_candidate(tmp_path):
    from bisectbot.errors import BadInput
    from bisectbot.ledger import Ledger
    from bisectbot.models import Candidate, CandidateKind
    from bisectbot.run.container import ContainerRunner
    from bisectbot.runner_profile import load_profile
    from bisectbot.session import Session
    from bisectbot.session.probing.oracles import reference_up

    recipe = parse_recipe(BASE + "runner: mi355x\nreproducer: {reference: {candidate: last-good}}\n"
                          "regress: diverges\nbisect: {parallel: 2}\n")
    profile = load_profile("mi355x")  # two TP=4 slots: one for the reference leaves one, parallel 2 needs two
    runner = ContainerRunner(recipe, profile, tmp_path / "logs")
    session = Session(recipe, Ledger(tmp_path / "ledger.db"), runner)
    with pytest.raises(BadInput, match=r"has 2 slot\(s\), bisect.parallel 2 needs 3"):
        with reference_up(session, Candidate(CandidateKind.COMMIT, "a" * 40), None):
            pass
