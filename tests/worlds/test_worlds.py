"""A fixed sample of generated worlds (issue 35, item 7) through the installed ``bisectbot run``.

Seeds 0..43 of :func:`tests.worlds.generator.generate` over every shape (the shape of a world is
its seed modulo the number of shapes: 3-4 worlds a shape). Each world is materialised and run
once (two at a time, in a module fixture: 467 s measured on the shared 2-core machine at load
average 11), then
one test per world asks what :func:`tests.worlds.build.expected_ok` asks: no culprit named at the
recipe's confidence that the truth does not allow, and the right culprit where one is
identifiable. The worlds main gets wrong are strict xfails with the reason: a fix flips them.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.worlds.build import Outcome, expected_ok, run_world
from tests.worlds.generator import generate

SEEDS = list(range(44))

#: Worlds main gets wrong, and how: seed -> reason (strict xfails: a fix flips them). Empty since
#: the coarse ladder (a band of garbage below max_size, seeds 18 30 42: issue 37) and the retried
#: transient build (HTTP 429 at the culprit, seeds 14 38: issue 35) landed.
XFAIL: dict[int, str] = {}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Outcome]:
    base = tmp_path_factory.mktemp("worlds")

    def one(seed: int) -> Outcome:
        return run_world(generate(seed), base / f"w{seed}", timeout_s=300)

    with ThreadPoolExecutor(max_workers=2) as ex:
        return dict(zip(SEEDS, ex.map(one, SEEDS)))


def _param(seed: int) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=XFAIL[seed])] if seed in XFAIL else []
    return pytest.param(seed, marks=marks, id=f"{seed}-{generate(seed).shape}")


@pytest.mark.slow
# the module fixture runs every world before the first test: its setup carries the whole sample
# (467 s measured at load average 11 on 2 cores; the suite's per-test 600 s would cut it there)
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("seed", [_param(s) for s in SEEDS])
def test_world(seed: int, outcomes: dict[int, Outcome]) -> None:
    world = generate(seed)
    o = outcomes[seed]
    assert o.category != "confident-wrong", (world.params, world.truth, o)
    assert expected_ok(world, o), (world.params, world.truth, o)


def test_the_generator_is_pure_and_has_the_truths_the_sample_needs() -> None:
    """The same seed gives the same world; the sample holds identifiable culprits, ranges and
    nameless truths; the generator imports nothing from bisectbot."""
    assert generate(7).to_dict() == generate(7).to_dict()
    kinds = {generate(s).truth.kind for s in SEEDS}
    assert {"culprit", "range", "ambiguous"} <= kinds, kinds
    assert kinds & {"no-regression", "older-than-range", "untestable-end"}, kinds
    src = (Path(__file__).parent / "generator.py").read_text()
    assert "import bisectbot" not in src and "from bisectbot" not in src
