"""Done-when of issue 5, through the CLI and the runner: three nightlies in the local registry ->
``nightlies record`` -> ``diff`` names the changed component -> ``build`` with the patch stack ->
server container healthy -> one reproducer request answered -> container gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import requests

from bisectbot.ledger import Ledger
from bisectbot.models import Candidate, CandidateKind
from bisectbot.recipe import load_recipe
from bisectbot.run.base import Prepared
from bisectbot.run.container import ContainerRunner
from bisectbot.runner_profile import load_profile
from tests.containers.conftest import REGISTRY

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def bb(state, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "BISECTBOT_STATE": str(state)}
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def ask(base_url: str, words: int) -> str:
    prompt = " ".join(["lorem"] * words) + " What is 2+2? Answer in one sentence."
    r = requests.post(f"{base_url}/v1/chat/completions", timeout=60, json={
        "model": "demo", "messages": [{"role": "user", "content": prompt}], "max_tokens": 64, "temperature": 0})
    r.raise_for_status()
    return r.json()["choices"][0]["message"]["content"]


def test_done_when(nightlies, vllm_repo, recipe_file, stack_dir, tmp_path):
    state = tmp_path / "state"
    repo = nightlies["repository"]
    n2, n3 = nightlies["N2"], nightlies["N3"]

    # 1. record: every tag -> digest lands in the ledger
    r = bb(state, "--json", "nightlies", "record", "--recipe", str(recipe_file), "--page-size", "2")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["recorded"] == 3 and len(out["new"]) == 3
    with Ledger(state) as led:
        rows = {row["tag"]: row["digest"] for row in led.nightlies(repo)}
    assert rows == {p.spec.tag: p.digest for p in nightlies["pushed"]}
    r = bb(state, "--json", "nightlies", "record", "--recipe", str(recipe_file))
    assert json.loads(r.stdout)["new"] == []  # second run: nothing new, last_seen moves

    r = bb(state, "--json", "nightlies", "list", "--recipe", str(recipe_file))
    assert [t["tag"] for t in json.loads(r.stdout)] == [p.spec.tag for p in nightlies["pushed"]]  # oldest first
    # issue 41, item 11: behind a registry without Docker Hub's dates the date is the tag's own
    listed = json.loads(r.stdout)
    assert all(t["last_updated"] is None and t["date"] for t in listed), listed
    text = bb(state, "nightlies", "list", "--recipe", str(recipe_file)).stdout
    assert listed[0]["date"] in text, text

    r = bb(state, "--json", "nightlies", "show", n3.spec.tag, "--recipe", str(recipe_file))
    shown = json.loads(r.stdout)
    assert shown["digest"] == n3.digest and shown["vllm"]["commit"] == vllm_repo["C"][:9]
    r = bb(state, "nightlies", "show", n3.pinned)
    assert f"(commit {vllm_repo['C'][:9]})" in r.stdout and "hip     7.2.53211" in r.stdout

    # 2. diff names the changed component with its commit range
    r = bb(state, "--json", "nightlies", "diff", n2.spec.tag, n3.spec.tag, "--recipe", str(recipe_file))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["changed"] == ["vllm"]
    vllm = d["components"][0]
    assert vllm["range"] == [vllm_repo["B"][:9], vllm_repo["C"][:9]]
    assert d["new"]["digest"] == n3.digest
    r = bb(state, "nightlies", "diff", n2.spec.tag, n3.spec.tag, "--recipe", str(recipe_file))
    assert "changed   vllm" in r.stdout and "unchanged aiter" in r.stdout

    r = bb(state, "nightlies", "record", "--recipe", str(recipe_file), "--introspect")
    assert r.returncode == 0, r.stderr
    with Ledger(state) as led:
        comps = {row["tag"]: row["components"] for row in led.nightlies(repo)}
    assert comps[n3.spec.tag]["vllm"] == n3.spec.vllm_version and comps[n3.spec.tag]["hip"] == "7.2.53211"

    # 3. build with the patch stack (content-addressed tag)
    logs = tmp_path / "logs"
    r = bb(state, "--json", "build", "--recipe", str(recipe_file), "--base", n3.spec.tag,
           "--stack-dir", str(stack_dir), "--log-dir", str(logs))
    assert r.returncode == 0, r.stderr
    built = json.loads(r.stdout)
    tag = built["tag"]
    try:
        assert tag.startswith("bisectbot/e2e-containers:") and built["patches"][0]["state"] == "applies"
        assert (logs / f"build-{built['key']}.log").exists()

        # 4. the runner prepares the same candidate: same key, the image is reused
        recipe = load_recipe(recipe_file)
        runner = ContainerRunner(recipe, load_profile("cpu"), log_dir=tmp_path / "run", stack_dir=stack_dir)
        cand = Candidate(CandidateKind.NIGHTLY, n3.digest, n3.spec.tag, "image")
        prepared = runner.prepare(cand)
        assert isinstance(prepared, Prepared), prepared
        assert prepared.image == tag and prepared.meta["reused"] is True

        # 5. server healthy, one reproducer request answered, container gone
        with runner.server(prepared) as srv:
            name = srv.meta["container"]
            answer = ask(srv.base_url, 5000)  # 5000 tokens: garbage on the unpatched nightly
        assert "the answer is 4" in answer  # the reference engine's coherent reply
        assert subprocess.run(["docker", "ps", "-aq", "--filter", f"name={name}"],
                              capture_output=True, text=True).stdout.strip() == ""
        assert any("server-" in p for p in prepared.log_paths)

        # the same request on the unpatched nightly is garbage: the patch is what made it good
        plain = Prepared(cand, build_key=n3.digest, image=n3.pinned)
        with runner.server(plain) as srv:
            assert "the answer is 4" not in ask(srv.base_url, 5000)  # garbage above 3000 tokens
            assert "the answer is 4" in ask(srv.base_url, 1000)  # below the threshold: fine
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


def test_cli_errors_are_one_line(tmp_path, recipe_file, require_docker):
    r = bb(tmp_path, "nightlies", "list", "--registry", REGISTRY, "--insecure",
           "--repository", "bisectbot-test/none-such")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "not found" in r.stderr
    r = bb(tmp_path, "nightlies", "list")
    assert r.returncode == 2 and "--repository" in r.stderr
    r = bb(tmp_path, "build", "--recipe", str(recipe_file), "--base", "x", "--overlay", "torch=abc")
    assert r.returncode == 2 and "vllm=COMMIT" in r.stderr


def test_runner_check_cpu(tmp_path, require_docker):
    r = bb(tmp_path, "--json", "runner", "check", "--profile", "cpu")
    checks = {c["name"]: c for c in json.loads(r.stdout)}
    assert r.returncode == 0 and checks["docker"]["ok"]
    r = bb(tmp_path, "runner", "check", "--profile", "mi355x")
    if not os.path.exists("/dev/kfd"):
        assert r.returncode == 1 and "FAIL device /dev/kfd" in r.stdout
