"""A fixed sample of generated worlds (issue 35, item 7) through the installed ``bisectbot run``.

Seeds 0..39 of :func:`tests.worlds.generator.generate` (two worlds of each of the 20 shapes: the
shape of a world is its seed modulo the number of shapes) and worlds an earlier main got wrong,
named by seed *and* shape (``generate(seed, [shape])`` is the same world whatever the list of
shapes, so adding a shape keeps them): bands below max_size (issue 37's coarse ladder), transient
builds at the culprit, a context-limit range, two-sided noise after a bad end's miss, a growing hit
rate. 46 worlds, within the done-when's 10 minutes on 2 cores; hundreds more run in
``benchmarks/worlds.py``. Each world is materialised and run once (two
at a time, in a module fixture), then one test per world asks what
:func:`tests.worlds.build.expected_ok` asks: no culprit named at the recipe's confidence that the
truth does not allow, and the right culprit where one is identifiable. The worlds main gets wrong
are strict xfails with the reason: a fix flips them.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.worlds.build import Outcome, expected_ok, run_world
from tests.worlds.generator import SHAPES, World, generate

#: (seed, shape): ``None`` draws the shape from the seed over every shape.
SAMPLE: list[tuple[int, str | None]] = [
    *[(s, None) for s in range(2 * len(SHAPES))],
    (18, "band"), (42, "band"),  # a band of garbage below max_size (issue 37; seed 30 is band in the range)
    (14, "build"), (38, "build"),  # a transient build failure (HTTP 429) at the culprit
    (32, "server-ctx"),  # a context-limit window: the honest range
    (178, "noise"), (311, "noise"),  # two-sided noise after a bad end that missed once
    (89, "growing"),  # a hit rate growing over the range, at the committed floor
    (202, None),  # server-flaky, 50 % of starts, no rates: c13 named verified with the culprit probed once (issue 40)
]


@functools.cache
def world_of(seed: int, shape: str | None) -> World:
    """The sample's world ``(seed, shape)`` (generated once: a sized world's truth takes a second)."""
    return generate(seed, [shape]) if shape else generate(seed)


#: Worlds main gets wrong, and how: "seed-shape" -> reason (strict xfails: a fix flips them). Noise worlds
#: 178 (c1 named at 0.992, the truth c3) and 311 ('older than the range' at 1.000) and growing world 89
#: (c18 named at 0.997, the truth c8) were wrong until the rates became open
#: (Bisection.set_open_hit_rates: the bug's one rate, each bad candidate's own, or either; the joint
#: information gain, which probes the good end when the good side's rate is in doubt).
XFAIL: dict[str, str] = {
    # server-flaky without rates: a bug that shows in only some server starts. The verification's re-probe of
    # the culprit is the run's only second start of a build seen failing -- the only test of whether the bug
    # hides from a start, which the predecessor's good rests on (bisectbot.verdict.agreement) -- so it is spent:
    # in 2 it read good in a clean start (inconclusive, honest); in 202 (50 %) the truth c12 read good in both
    # of its starts and, with the culprit probed once (issue 40's first cut), c13 was named verified at 1.000.
    "2-server-flaky": "the bug shows on 70 % of starts, no rates: the culprit's re-probe reads good (inconclusive)",
    "202-server-flaky": "the bug shows on 50 % of starts, no rates: the culprit's re-probe reads good (inconclusive)",
}


def _id(seed: int, shape: str | None) -> str:
    return f"{seed}-{world_of(seed, shape).shape}"


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    base = tmp_path_factory.mktemp("worlds")

    def one(key: tuple[int, str | None]) -> Outcome:
        return run_world(world_of(*key), base / f"w{_id(*key)}", timeout_s=300)

    with ThreadPoolExecutor(max_workers=2) as ex:
        return dict(zip((_id(*k) for k in SAMPLE), ex.map(one, SAMPLE)))


def _param(seed: int, shape: str | None) -> object:
    key = _id(seed, shape)
    marks = [pytest.mark.xfail(strict=True, reason=XFAIL[key])] if key in XFAIL else []
    return pytest.param(seed, shape, marks=marks, id=key)


@pytest.mark.slow
# the module fixture runs every world before the first test: its setup carries the whole sample
# (467 s measured at load average 11 on 2 cores; the suite's per-test 600 s would cut it there)
@pytest.mark.timeout(1500)
@pytest.mark.parametrize(("seed", "shape"), [_param(*k) for k in SAMPLE])
def test_world(seed: int, shape: str | None, outcomes: dict[str, Outcome]) -> None:
    world = world_of(seed, shape)
    o = outcomes[_id(seed, shape)]
    assert o.category != "confident-wrong", (world.params, world.truth, o)
    assert expected_ok(world, o), (world.params, world.truth, o)


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "shape"), [pytest.param(*k, id=_id(*k)) for k in SAMPLE])
def test_no_world_names_a_culprit_its_truth_does_not_allow_confidently(seed: int, shape: str | None,
                                                                       outcomes: dict[str, Outcome]) -> None:
    """The one property no world may lose, xfail or not: no culprit named at the recipe's confidence that the
    truth does not allow (an xfail of :func:`test_world` is about being right, never this)."""
    o = outcomes[_id(seed, shape)]
    assert o.category != "confident-wrong", (world_of(seed, shape).params, world_of(seed, shape).truth, o)


def test_the_sample_holds_every_shape_twice_and_the_worlds_earlier_mains_got_wrong() -> None:
    """At least 40 worlds (issue 35's done-when), every shape at least twice, no world twice."""
    worlds = [world_of(*k) for k in SAMPLE]
    assert len(SAMPLE) >= 40 and len({_id(*k) for k in SAMPLE}) == len(SAMPLE)
    shapes = [w.shape for w in worlds]
    assert all(shapes.count(s) >= 2 for s in SHAPES), shapes
    assert world_of(18, "band").shape == "band" and world_of(18, "band").params == generate(18, ["band", "step"]).params


def test_the_generator_is_pure_and_has_the_truths_the_sample_needs() -> None:
    """The same seed gives the same world; the sample holds identifiable culprits, ranges and
    nameless truths; the generator imports nothing from bisectbot."""
    assert generate(7).to_dict() == generate(7).to_dict()
    kinds = {world_of(*k).truth.kind for k in SAMPLE}
    assert {"culprit", "range", "ambiguous"} <= kinds, kinds
    assert kinds & {"no-regression", "older-than-range", "untestable-end"}, kinds
    src = (Path(__file__).parent / "generator.py").read_text()
    assert "import bisectbot" not in src and "from bisectbot" not in src


def test_a_merge_world_is_the_history_its_truth_speaks_of(tmp_path: Path) -> None:
    """The merge shape's repository: the merge commit has the main and branch tips as parents, the
    first-parent chain is the one the truth was computed on, and a branch bug is named by the merge
    (first_parent true) or by the branch commit (false)."""
    import subprocess

    from tests.worlds.build import materialise
    from tests.worlds.generator import SHAPES

    seen = set()
    for seed in range(40):
        world = generate(seed, ["merge"])
        p = world.params
        key = (p["first_parent"], p["branch_bug"] is not None)
        if key in seen:
            continue
        seen.add(key)
        m = materialise(world, tmp_path / f"w{seed}")
        git = ["git", "-C", str(m.repo)]
        merge = m.shas[p["merge_index"]]
        parents = subprocess.run([*git, "rev-list", "--parents", "-n1", merge], capture_output=True, text=True,
                                 check=True).stdout.split()[1:]
        main_parent = p["chain"][p["chain"].index(p["merge_index"]) - 1]
        branch_tip = p["fork"] + p["branch"]  # creation order: main 0..fork, then the branch
        assert parents == [m.shas[main_parent], m.shas[branch_tip]], parents
        chain = subprocess.run([*git, "rev-list", "--first-parent", "--reverse", m.shas[-1]], capture_output=True,
                               text=True, check=True).stdout.split()
        assert chain == [m.shas[i] for i in p["chain"]]
        if p["branch_bug"] is not None:
            assert world.truth.culprits == [p["merge_index"] if p["first_parent"] else p["branch_bug"]]
        else:
            assert world.truth.culprits == [p["k"]]
    assert len(seen) == 4 and "merge" in SHAPES


@pytest.mark.slow
# seed 7 keeps 1373 tokens: the longest prompt (6000 tokens asked) then reads an implausible 16.8
# characters a token; seed 16 keeps 1564 (14.8, plausible): only the plateau shows it (two prompts of
# 1.25x the characters measuring the same). Both named a wrong culprit at 1.000 before.
# seed 103 keeps 1237: the bad end's failing prompts (3009, 3018 tokens asked) measured 1237 each (too close
# in length for the plateau) and the cut misled the sizing (a "6000-token" prompt of 144 characters measured
# a plausible 40): only the bad end's own count of the same text shows it (verdict.scope, issue 35).
@pytest.mark.parametrize("seed", [7, 16, 103])
def test_a_server_that_truncates_silently_is_never_good_at_the_bad_ends_prompts(tmp_path: Path, seed: int) -> None:
    """A confident wrong culprit the benchmark found (server-truncate seed 7): c6..c14 keep the last
    1373 tokens of a prompt; asked the bad end's failing prompts (~2096 tokens, measured so there)
    they measured 1373 and answered OK, so c14 read good and c15 was named at confidence 1.000.
    Now the probe voids an OK of a prompt that measured the length at which the same server cuts
    longer ones (reproduce.focus._cut_focus): c6..c14 are skips, the answer the honest range."""
    world = generate(seed, ["server-truncate"])
    assert world.truth.kind == "range" and world.params["keep"] < world.params["threshold"]
    o = run_world(world, tmp_path / "w", timeout_s=300)
    assert o.category == "range-ok", (world.params, o)
