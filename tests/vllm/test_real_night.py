"""The main job on the real thing (issue 38): a night over real vLLM nightly images.

Images (``tests/vllm/images.py``): the real vLLM CPU build in the suite's Debian image, a history
over vLLM's real Python tree (c0 the installed tree; c1, c2, c4 harmless; c3 plants the lane's
chunked-prefill bug), and four "nightlies" in the local registry tagged like ``rocm/vllm-dev``'s:
N0 = c0, N1 = c1, N2 = c2, N3 = c4. The night (``tests/vllm/real_night.py``): ``nightlies record``
-> ``run`` with the container runner (runner profile ``cpu``, the tiny model bind-mounted read-only)
-> nightly stage N1..N3 -> image diff (vLLM c2..c4) -> the vLLM commit stage (c3, an overlay on the
last-good nightly) -> c3 named and verified. The recipe's patch stack is the project's real one,
applied to the real files of every candidate. Every server is real vLLM in a container: the images
hold no other engine, and the test reads each server's log for vLLM's own start line with the
version its image records. Then the report's Reproduce section is run as a maintainer would: its
shell lines build and serve the first bad candidate without bisectbot, and its request gets the
reply the report shows.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import requests

from bisectbot.report.load import load_result
from bisectbot.report.reproduce_kit import kit
from tests.containers.conftest import REGISTRY
from tests.vllm import images, lane
from tests.vllm import real_night as rn

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(3000)]

#: Done-when budget of issue 38: server starts of the whole night (probes, reference, calibration).
MAX_SERVER_STARTS = 8
#: Done-when budget of issue 38: the night itself (``bisectbot run``), seconds on 2 cores.
MAX_NIGHT_S = 12 * 60


@pytest.fixture(scope="module")
def real_nightlies(vllm_python: Path, require_docker, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The base image, the history and the four pushed nightlies (module doc)."""
    t0 = time.monotonic()
    base = images.ensure_vllm_base(vllm_python)
    t_base = time.monotonic() - t0
    repo = tmp_path_factory.mktemp("real-night") / "vllm"
    shas = images.make_history(vllm_python, repo)
    repository = f"bisectbot-test/vllm-dev-{uuid.uuid4().hex[:8]}"
    t1 = time.monotonic()
    pushed = images.push_vllm_nightlies(vllm_python, base, repo, shas, rn.NIGHTLIES, repository, REGISTRY)
    print(f"\nreal nightlies: base {base} ({t_base:.0f} s), {len(pushed)} nightlies pushed "
          f"({time.monotonic() - t1:.0f} s)")
    try:
        yield {"base": base, "repo": repo, "shas": shas, "repository": repository, "pushed": pushed}
    finally:
        for p in pushed:
            subprocess.run(["docker", "rmi", "-f", p.ref], capture_output=True)


@pytest.fixture(scope="module")
def night(real_nightlies: dict, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The night, run once for the module's tests: its result, cost and paths."""
    tmp = tmp_path_factory.mktemp("night")
    n0, n1, _n2, n3 = real_nightlies["pushed"]
    out, state = tmp / "out", tmp / "state"
    data = rn.recipe(REGISTRY, real_nightlies["repository"], real_nightlies["repo"], tiny_model, out,
                     good=n1.tag, bad=n3.tag, calibrate_with=n0.tag)
    data["bisect"]["minimize"] = True  # issue 42: inside the planted commit (3 files, 4 hunks)
    path = rn.write_recipe(tmp / "recipe.yaml", data)
    ran = rn.run_night(path, state, out, timeout=MAX_NIGHT_S * 3)
    (tmp / "night.log").write_text(ran.log, encoding="utf-8")
    cost = rn.night_cost(ran, state, data["name"], real_nightlies["repository"])
    print(f"\nnight over real vLLM nightlies: {ran.seconds:.0f} s, status {ran.result.get('status')}, "
          f"cost {json.dumps(cost.to_dict())}")
    for st in ran.result.get("stages", []):
        for pr in st["probes"]:
            print(f"  {st.get('component') or '':6} {(pr['candidate'].get('label') or pr['candidate']['ref'])[:40]:40} "
                  f"{pr['verdict']:5} {pr.get('duration_s') or 0:.1f} s")
    return {"run": ran, "cost": cost, "out": out, "state": state, "recipe": path}


def test_the_night_names_the_planted_commit_verified_on_real_vllm_in_containers(night: dict, real_nightlies: dict) -> None:
    ran, cost = night["run"], night["cost"]
    shas = real_nightlies["shas"]
    n0, n1, n2, n3 = real_nightlies["pushed"]
    res = ran.result
    assert "Traceback" not in ran.log, ran.log[-4000:]
    assert res.get("status") == "culprit", (res.get("status"), ran.log[-4000:])
    s1, s2 = res["stages"][0], res["stages"][-1]
    assert s1["first_bad"]["label"] == n3.tag and s1["last_good"]["label"] == n2.tag
    assert s2["component"] == "vllm" and s2["status"] == "culprit"
    assert s2["first_bad"]["ref"] == shas[images.PLANTED] and s2["last_good"]["ref"] == shas[2]
    assert s2["first_bad"]["meta"]["base"] == n2.pinned  # an overlay on the last-good nightly
    assert re.search(r"^culprit: vllm \w+ .*verified$", ran.log, re.M), ran.log[-3000:]
    # every server was real vLLM from these images: its start line names the version the image records
    # (a nightly's own, or the last-good nightly's for the overlays built on it); nothing else started
    nightly_versions = {p.version for p in real_nightlies["pushed"]}
    assert cost.server_starts and all(v in nightly_versions for v in cost.versions), cost.versions
    assert {n0.version, n1.version, n3.version} <= set(cost.versions)
    bad = [pr for st in res["stages"] for pr in st["probes"] if pr["verdict"] == "bad"]
    assert bad and all("diverges from the reference" in pr["reason"] for pr in bad)
    for st in res["stages"]:
        for pr in st["probes"]:  # the real patch stack met the real files of every candidate
            states = {p["id"]: p["state"] for p in pr.get("patches") or []}
            assert states == {"vllm-sparse-mla-workspace": "already-upstream",
                              "vllm-sparse-mla-skip-kv-gather": "applies-with-offset",
                              "aiter-chunkq-clamp": "not-applicable"}, (pr["candidate"]["label"], pr.get("patches"))
            for row in pr.get("table") or []:  # cold prefills: vLLM's own prefix-cache counters
                pc = (row.get("evidence") or {}).get("prefix_cache") or {}
                assert pc.get("metrics_hits", 0) == 0, row
    issue = (night["out"] / "issue.md").read_text()
    assert shas[images.PLANTED] in issue or shas[images.PLANTED][:10] in issue


def test_the_night_stays_within_its_budget_of_server_starts_and_time(night: dict) -> None:
    """8 starts: the reference (also the good end N1's probe), the calibration build N0, N3, N2, the
    commit stage's ends (c4 and c2 on N2: the nightly boundary re-measured), c3 and its re-probe; c2's
    build was measured twice (N2, and the good end), so it is not re-probed (issue 40)."""
    cost = night["cost"]
    res = night["run"].result
    s1, s2 = res["stages"][0], res["stages"][-1]
    attempts = [(pr["candidate"]["ref"], pr["extra"].get("attempt")) for pr in s1["probes"]]
    assert all(a == 1 for _, a in attempts), attempts  # stage 1 re-probes nothing: the commit stage's ends verify it
    assert s1["message"].startswith("verified by the vllm commits stage's ends"), s1["message"]
    shared = [pr["candidate"]["label"] for pr in s1["probes"] if "the reference's start" in str(pr["extra"].get("server"))]
    assert shared == [s1["candidates"][0]["label"]], shared  # the good end ran on the reference's server
    assert [pr["extra"].get("attempt") for pr in s2["probes"] if pr["candidate"]["ref"] == s2["last_good"]["ref"]] == [1]
    assert cost.server_starts - minimize_starts(res) <= MAX_SERVER_STARTS, cost.to_dict()
    assert cost.seconds - minimize_seconds(night) <= MAX_NIGHT_S, cost.to_dict()


#: The done-when of issue 42 on the lane: server starts of ``--minimize`` inside the planted commit.
MAX_MINIMIZE_STARTS = 8


def minimize_starts(res: dict) -> int:
    """Server starts of the minimize stage: each subset it tested that got as far as a server (a part
    that did not apply or build starts none)."""
    tests = (res.get("minimized") or {}).get("tests") or []
    return sum(1 for t in tests if not str(t.get("reason", "")).startswith(("the change does not apply", "build failed")))


def minimize_seconds(night: dict) -> float:
    """Seconds the minimize stage's probes took (their servers' starts included)."""
    logs = sorted((night["state"] / "logs").glob("*/server-*.log"))
    n = minimize_starts(night["run"].result)
    if not n or len(logs) < n:
        return 0.0
    first = rn._created(logs[-n])
    return max(0.0, night["run"].ended - first)


def test_minimize_names_the_planted_hunk_within_8_server_starts(night: dict, real_nightlies: dict) -> None:
    """The planted commit holds 4 hunks in 3 files (tests/vllm/images.py): ddmin over the files, then the
    planted file's hunks, each subset an overlay of the predecessor plus those parts, on real vLLM in a
    container and judged on the bad end's diverging prompts; the plant alone is named, verified, and the
    rest of the commit without it is good."""
    m = night["run"].result["minimized"]
    assert m["searchable"] and m["culprit"] == real_nightlies["shas"][images.PLANTED], m
    assert m["files"] == 3 and m["level"] == "hunks" and m["parts"] == 2, m
    assert len(m["subset"]) == 1 and m["subset"][0].startswith(f"vllm/{lane.PLANTED_FILE} hunk 2"), m["subset"]
    assert "continuing = (query_lens > 1)" in m["diff"] and "Chunked prefill: continuation" not in m["diff"], m["diff"]
    assert m["verified"] == "bad" and m["rest"] == "good", m
    assert minimize_starts(night["run"].result) <= MAX_MINIMIZE_STARTS, m["tests"]
    report = (night["out"] / "report.md").read_text()
    assert "Smallest failing part of the culprit" in report and "continuing = (query_lens > 1)" in report


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_reproduce_section_serves_the_first_bad_without_bisectbot(night: dict, tmp_path: Path) -> None:
    """The Reproduce section's shell lines, run as written (a clone of the history, the overlay
    Dockerfile on the last-good nightly, ``docker build``, ``docker run``), then its request: the
    reply is the first bad's reply the report shows."""
    result, _ = load_result(night["out"] / "result.json")
    k = kit(result)
    assert k is not None and k.request is not None
    script = "\n".join(k.server)
    assert "docker build" in script and "-v " in script and "bisectbot-candidate" in script.split("docker run")[-1]
    assert not re.search(r"(^|[;&|]\s*)bisectbot\s", script, re.M), script  # no bisectbot command in it
    tag = f"bisectbot-repro-{uuid.uuid4().hex[:8]}"
    script = script.replace("bisectbot-candidate", tag)
    (tmp_path / "request.json").write_text(k.request_json(), encoding="utf-8")
    port = _free_port()
    proc = subprocess.Popen(["bash", "-euc", script], cwd=tmp_path, env={**os.environ, "PORT": str(port)},
                            stdout=open(tmp_path / "server.log", "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + lane.HEALTH_TIMEOUT_S
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                if requests.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(2)
        else:
            pytest.fail("the Reproduce section's server never became healthy: "
                        + (tmp_path / "server.log").read_text()[-3000:])
        r = requests.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=k.request, timeout=300)
        r.raise_for_status()
        reply = r.json()["choices"][0]["message"]["content"] or ""
        # the report shows model output as data: control characters escaped (\\xNN), long replies cut with "…"
        shown = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", reply).strip()
        seen = k.seen.strip().removesuffix("…").rstrip()
        assert len(seen) >= 20 and shown.startswith(seen), (shown, k.seen)
    finally:
        for cid in subprocess.run(["docker", "ps", "-q", "--filter", f"ancestor={tag}"], capture_output=True,
                                  text=True).stdout.split():
            subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
