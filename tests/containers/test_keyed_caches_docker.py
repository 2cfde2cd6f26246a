"""Issue 40: a container candidate's compile/JIT caches, bound from the host per key (real dockerd, real
registry, the session's nightlies): a second container of the same build finds what the first wrote, a
commit overlaid on the same nightly shares aiter's JIT directory but not vLLM's compile cache, and
another nightly shares neither (:meth:`bisectbot.run.container.ContainerRunner.keyed_caches`)."""

from __future__ import annotations

import json

import pytest

from bisectbot.models import Candidate, CandidateKind
from bisectbot.recipe import parse_recipe
from bisectbot.run.base import Prepared
from bisectbot.run.container import ContainerRunner
from bisectbot.runner_profile import load_profile

pytestmark = pytest.mark.docker

LOOK = """\
import json, os, time
out = {}
for var in ("VLLM_CACHE_ROOT", "AITER_JIT_DIR"):
    d = os.environ[var]
    out[var] = sorted(os.listdir(d))
    open(os.path.join(d, os.environ["WHO"] + "-" + str(time.time_ns())), "w").write("x")
print(json.dumps(out))
"""


def test_a_build_finds_its_own_caches_and_a_commit_on_the_same_nightly_shares_aiters(
        nightlies, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("BISECTBOT_CACHE", str(tmp_path / "cache"))
    recipe = parse_recipe("name: kc\nmodel: demo\nsource: {kind: registry, registry: r, repository: x}\n"
                          "server: {command: [serve]}\nrunner: cpu\n")
    runner = ContainerRunner(recipe, load_profile("cpu"), tmp_path / "logs")
    n1, n2 = nightlies["N1"], nightlies["N2"]

    def prepared(image: str, digest: str, kind: CandidateKind, ref: str, meta: dict, key: str) -> Prepared:
        return Prepared(Candidate(kind, ref, ref[:8], "vllm", meta), build_key=key, image=image,
                        meta={"base_digest": digest})

    d1, d2 = n1.pinned.split("@")[1], n2.pinned.split("@")[1]
    night1 = prepared(n1.pinned, d1, CandidateKind.NIGHTLY, d1, {"image": n1.pinned}, d1)
    commit_on_1 = prepared(n1.pinned, d1, CandidateKind.COMMIT, "c" * 40, {"base": n1.pinned}, f"{d1}+overlay-c")
    night2 = prepared(n2.pinned, d2, CandidateKind.NIGHTLY, d2, {"image": n2.pinned}, d2)

    def look(p: Prepared, who: str) -> dict:
        monkeypatch.setenv("WHO", who)
        r = runner.run_command(p, ["python3", "-c", LOOK.replace('os.environ["WHO"]', repr(who))], timeout_s=60)
        assert r.returncode == 0, r.stderr_tail
        return json.loads(r.stdout_tail.strip().splitlines()[-1])

    first = look(night1, "n1a")
    assert first == {"VLLM_CACHE_ROOT": [], "AITER_JIT_DIR": []}
    again = look(night1, "n1b")  # the same build, a new container: warm
    assert [e.split("-")[0] for e in again["VLLM_CACHE_ROOT"]] == ["n1a"]
    on_same = look(commit_on_1, "c1")  # another build on the same nightly: aiter's JIT shared, vLLM's not
    assert on_same["VLLM_CACHE_ROOT"] == [] and {e.split("-")[0] for e in on_same["AITER_JIT_DIR"]} == {"n1a", "n1b"}
    other = look(night2, "n2")  # another nightly: neither
    assert other == {"VLLM_CACHE_ROOT": [], "AITER_JIT_DIR": []}
    env, mounts = runner.keyed_caches(night1)
    assert env["VLLM_CACHE_ROOT"] == "/var/cache/bisectbot/vllm" and all(m.endswith(":rw") for m in mounts)
    assert all(m.startswith(str(tmp_path / "cache" / "keyed")) for m in mounts)
