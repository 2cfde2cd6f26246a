"""The real-vLLM lane's costs (issue 22): start-up, seconds per probe size, and a threshold search's
requests and prompt tokens on real vLLM next to the same search on the reference engine.

Usage: ``python benchmarks/vllm_lane.py [--json]`` (needs the lane: ``scripts/vllm-lane.sh``;
``BISECTBOT_VLLM_PYTHON`` names its python, else the newest cached lane is used).

Printed:

* **start-up**: seconds from ``python -m vllm.entrypoints.openai.api_server`` to the first healthy
  ``GET /health``, for the unpatched server started alone, then for the planted one;
* **seconds per probe size**: one cold greedy request (its own ``cache_salt``, 32 tokens) at
  1K, 2K, 4K, 8K, 16K and 32K prompt tokens;
* **threshold search**: ``probe --reference-endpoint --regress diverges`` of the planted build
  (first bad size 2050 tokens: the chunked-prefill bug of ``tests/vllm/lane.py``) against the
  unpatched one, 500 tokens to ``max_size``: the candidate's chat requests and the prompt tokens
  both servers prefilled (vLLM's ``vllm:prefix_cache_queries_total``; hits must be 0), the wall
  time; and the same search against the reference engine (``bisectbot.demo.engine``, a subtle
  engine with its threshold at 2050 tokens, a grounded good one as reference; ``/stats``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bisectbot.demo.engine import start_engine  # noqa: E402
from bisectbot.recipe import ReproducerSpec  # noqa: E402
from bisectbot.reproduce.client import Client  # noqa: E402
from bisectbot.reproduce.prompts import PromptBuilder  # noqa: E402
from bisectbot.reproduce.reference import Noise, reference_client, search_with_reference  # noqa: E402
from tests.vllm import lane  # noqa: E402

SIZES = (1000, 2000, 4000, 8000, 16000, 32000)
FIRST_BAD = lane.BATCH_TOKENS + 2


def spec(max_size: int, reference: str) -> ReproducerSpec:
    return ReproducerSpec.model_validate(
        {"min_size": 500, "max_size": max_size, "question": "Summarize the document in two sentences.",
         "expected_answer": None, "needles": 0, "max_tokens": 32,
         "reference": {"endpoint": reference, "continuation_tokens": 32}})


def per_size(url: str) -> list[dict[str, Any]]:
    c = Client(url, timeout_s=300)
    b = PromptBuilder("Summarize the document in two sentences.", needles=0, seed=11, tokenize=c.tokenize)
    out = []
    for size in SIZES:
        p = b.build(min(size, lane.MAX_MODEL_LEN - 32 - 64))
        r = c.chat(p.messages, max_tokens=32)
        out.append({"size": r.prompt_tokens or size, "seconds": round(r.seconds, 2), "ok": r.ok})
    return out


def search(candidate: str, reference: str, max_size: int, queried: list[Any]) -> dict[str, Any]:
    s = spec(max_size, reference)
    before = [q() for q in queried]
    t0 = time.monotonic()
    res = search_with_reference(candidate, reference_client(s.reference, timeout_s=300), s, Noise(),  # type: ignore[arg-type]
                                diverges_bad=True, garbage_bad=False, timeout_s=300)
    wall = time.monotonic() - t0
    after = [q() for q in queried]
    return {"status": res.status, "interval": [res.last_ok, res.first_garbage], "requests": res.requests,
            "wall_s": round(wall, 1), "before": before, "after": after}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    py = lane.lane_python()
    model = lane.tiny_model(py)
    tmp = Path(tempfile.mkdtemp(prefix="vllm-lane-bench-"))
    rows: dict[str, Any] = {}
    plain = lane.VllmServer(py, model, tmp / "plain.log", cpu="0").ready()
    rows["startup_plain_s"] = round(plain.started_s, 1)
    planted = None
    try:
        planted = lane.VllmServer(py, model, tmp / "planted.log", overlay=lane.planted_overlay(py, tmp / "ov"),
                                  cpu="1").ready()
        rows["startup_planted_s"] = round(planted.started_s, 1)
        rows["seconds_per_size"] = per_size(plain.url)
        max_size = lane.MAX_MODEL_LEN - 32 - 64
        got = search(planted.url, plain.url, max_size, [planted.prefix_cache, plain.prefix_cache])
        (h0c, q0c), (h0r, q0r) = got.pop("before")
        (h1c, q1c), (h1r, q1r) = got.pop("after")
        got.update(candidate_prompt_tokens=q1c - q0c, reference_prompt_tokens=q1r - q0r,
                   cache_hits=(h1c - h0c) + (h1r - h0r))
        rows["vllm_search"] = got
    finally:
        for srv in (plain, planted):
            if srv is not None:
                srv.stop()
    with start_engine(threshold=FIRST_BAD, subtle=True, numerics=1, max_model_len=lane.MAX_MODEL_LEN) as bad, \
            start_engine(threshold=None, grounded=True, numerics=2, max_model_len=lane.MAX_MODEL_LEN) as good:
        got = search(bad.url, good.url, lane.MAX_MODEL_LEN - 32 - 64, [])
        got.pop("before"), got.pop("after")
        got.update(candidate_prompt_tokens=sum(bad.stats()["prompt_tokens"]),
                   reference_prompt_tokens=sum(good.stats()["prompt_tokens"]))
        rows["engine_search"] = got
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"start-up (python -m vllm.entrypoints.openai.api_server -> /health 200): unpatched {rows['startup_plain_s']} s "
          f"(alone), planted {rows['startup_planted_s']} s (beside it)")
    print("seconds per probe size (one cold greedy request, 32 tokens):")
    for r in rows["seconds_per_size"]:
        print(f"  {r['size']:>6} prompt tokens: {r['seconds']:>6.2f} s")
    print(f"threshold search, probe --reference-endpoint --regress diverges, 500..{lane.MAX_MODEL_LEN - 96} tokens "
          f"(first bad {FIRST_BAD}):")
    print(f"  {'server':<18} {'status':<8} {'interval':<16} {'requests':>8} {'cand. tokens':>12} {'ref. tokens':>11} "
          f"{'wall s':>7}")
    for name, key in (("real vLLM (CPU)", "vllm_search"), ("reference engine", "engine_search")):
        r = rows[key]
        print(f"  {name:<18} {r['status']:<8} {str(r['interval']):<16} {r['requests']:>8} "
              f"{r['candidate_prompt_tokens']:>12} {r['reference_prompt_tokens']:>11} {r['wall_s']:>7}")
    print(f"  prefix-cache hits over the vLLM search: {rows['vllm_search']['cache_hits']} tokens (cold prefills: 0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
