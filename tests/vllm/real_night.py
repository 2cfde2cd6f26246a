"""The night over real vLLM nightlies (issue 38), shared by ``test_real_night.py`` and
``benchmarks/real_night.py``: the recipe, the run, and what the night cost.

The nightlies come from :mod:`tests.vllm.images` (N0 = c0, N1 = c1, N2 = c2, N3 = c4; c3 plants the
lane's chunked-prefill bug). The recipe serves the tiny model (bind-mounted read-only) with the
image's own ``python3 -m vllm.entrypoints.openai.api_server``, applies the project's real patch
stack, and compares each candidate with the last-good build (``regress: diverges``), calibrated
against N0.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from tests.vllm import lane

#: The project's real patch stack (bisectbot/patches/stack.yaml), in its order.
STACK = ["vllm-sparse-mla-workspace", "vllm-sparse-mla-skip-kv-gather", "aiter-chunkq-clamp"]
#: ``(tag, index into the history's SHAs)``, tagged like ``rocm/vllm-dev``'s dated nightlies.
NIGHTLIES = [("nightly_main_20261130", 0), ("nightly_main_20261201", 1), ("nightly_main_20261202", 2),
             ("nightly_main_20261203", 4)]
#: vLLM's environment in the container: 1 GiB of KV cache (the tiny model needs far less), no usage
#: reporting, no hub access (CI has none), the engine in the API server's process (one process per
#: container: a start ~10 s shorter on 2 cores, docs/real-vllm.md).
ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1",
       "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
#: Where the tiny model is mounted in the server container.
MODEL_IN_CONTAINER = "/models/tiny"
#: vLLM's own start line with the version the image records (``vllm/_version.py``): 0.32 prints it
#: in its ASCII-art banner (``█  version 0.32.1.dev2+g…``), older releases as ``vLLM API server version``.
VLLM_START = re.compile(r"(?:vLLM API server version|█\s+version)\s+(\d\S*)")


def recipe(registry: str, repository: str, history: Path, tiny_model: Path, out: Path,
           good: str, bad: str, calibrate_with: str) -> dict[str, Any]:
    """The night's recipe (module doc) as a mapping; ``good``/``bad``/``calibrate_with`` are tags.
    Prompt sizes are tokens: 1,000..4,000 brackets the plant (it needs a second prefill chunk,
    i.e. more than the 2,048 batched tokens of :data:`tests.vllm.lane.SERVE_FLAGS`); ``tolerance``
    0.25 because the night asks which commit, not where the threshold lies (the threshold search
    stops once the interval is within 25 %, fewer requests per probe)."""
    return {
        "name": "vllm-real-night",
        "description": "real vLLM CPU nightlies: a prefill continuation chunk loses its context (planted)",
        "model": "tiny", "tp": 1, "runner": "cpu",
        "source": {"kind": "registry", "registry": registry, "repository": repository,
                   "tag_pattern": "nightly_main_*", "insecure": True},
        "server": {"command": ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", MODEL_IN_CONTAINER,
                               "--host", "0.0.0.0", "--port", "{port}", *lane.SERVE_FLAGS],
                   "port": 8000, "env": dict(ENV), "mounts": [f"{tiny_model}:{MODEL_IN_CONTAINER}:ro"],
                   "health_timeout_s": lane.HEALTH_TIMEOUT_S, "request_timeout_s": 300},
        "patches": list(STACK),
        "reproducer": {"kind": "prefill", "min_size": 1000, "max_size": 4000, "tolerance": 0.25,
                       "tolerance_tokens": 64, "question": "Summarize the document in two sentences.",
                       "expected_answer": None, "needles": 0, "max_tokens": 32, "temperature": 0.0, "seed": 0,
                       "reference": {"candidate": "last-good", "continuation_tokens": 32,
                                     "calibrate_with": calibrate_with}},
        "regress": "diverges",
        "bisect": {"good": good, "bad": bad, "verify": True,
                   "components": {"vllm": {"repo": str(history), "runtime_paths": ["vllm/"]}}},
        "report": {"dir": str(out)},
    }


def bb(state: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m bisectbot --state STATE ARGS`` without a GitHub token in its environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "BISECTBOT_STATE")}
    return subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(state), *args], capture_output=True,
                          text=True, env=env, timeout=timeout)


@dataclass
class Night:
    """One night's run: ``result`` (result.json), ``log`` (its stdout + stderr), ``seconds`` wall time."""

    result: dict[str, Any]
    log: str
    seconds: float
    started: float
    ended: float
    rc: int


def run_night(recipe_path: Path, state: Path, out: Path, timeout: float) -> Night:
    """``nightlies record --introspect`` then ``run RECIPE --out OUT``; the run's wall time in seconds."""
    r = bb(state, "--json", "nightlies", "record", "--recipe", str(recipe_path), "--introspect")
    if r.returncode != 0:
        raise RuntimeError(f"nightlies record failed: {r.stderr.strip()[-2000:]}")
    started = time.time()
    p = bb(state, "run", str(recipe_path), "--out", str(out), timeout=timeout)
    ended = time.time()
    res_path = out / "result.json"
    res = json.loads(res_path.read_text()) if res_path.exists() else {}
    return Night(res, p.stdout + p.stderr, ended - started, started, ended, p.returncode)


def write_recipe(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@dataclass
class Cost:
    """What the night cost: ``server_starts`` (every vLLM server container: probes, the last-good
    reference, the calibration build), ``versions`` (the vLLM version each start printed, in order),
    ``images_built`` (build logs: the patch stack or an overlay on a nightly), ``bytes_pulled`` (blob
    bytes the local registry served during the night), ``probes`` and ``probe_s`` (seconds per probe,
    server start included), ``server_s`` (seconds from each container's first to last log line),
    ``bot_share`` (1 - server time / night time: what the bot itself spent, builds included)."""

    seconds: float
    server_starts: int
    versions: list[str] = field(default_factory=list)
    images_built: int = 0
    bytes_pulled: int = 0
    probes: int = 0
    probe_s: list[float] = field(default_factory=list)
    server_s: float = 0.0
    bot_share: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_ACCESS = re.compile(r'\[(?P<t>[^\]]+)\] "GET /v2/(?P<repo>\S+)/blobs/\S+ HTTP/[\d.]+" 200 (?P<n>\d+)')


def registry_bytes(log: Path, repository: str, since: float, until: float) -> int:
    """Blob bytes the registry (``scripts/services.sh``'s access log) served for ``repository``
    between the two POSIX times; 0 when the log is missing."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return 0
    total = 0
    for m in _ACCESS.finditer(text):
        t = datetime.strptime(m["t"], "%d/%b/%Y:%H:%M:%S %z").timestamp()
        if m["repo"] == repository and since - 1 <= t <= until + 1:
            total += int(m["n"])
    return total


def night_cost(night: Night, state: Path, recipe_name: str, repository: str,
               registry_log: Path = Path("/tmp/bisectbot-services/registry.log")) -> Cost:
    """The :class:`Cost` of ``night`` from its state directory's logs and its result."""
    logs = state / "logs" / recipe_name
    servers = sorted(logs.glob("server-*.log"))
    versions, spans = [], []
    for f in servers:
        m = VLLM_START.search(f.read_text(errors="replace"))
        versions.append(m.group(1) if m else "")
        spans.append((_created(f), f.stat().st_mtime))
    server_s = _union(spans)
    probes = [pr for st in night.result.get("stages", []) for pr in st.get("probes", [])]
    return Cost(
        seconds=round(night.seconds, 1), server_starts=len(servers), versions=versions,
        images_built=len(list(logs.glob("build-*.log"))),
        bytes_pulled=registry_bytes(registry_log, repository, night.started, night.ended),
        probes=len(probes), probe_s=[round(float(pr.get("duration_s") or 0), 1) for pr in probes],
        server_s=round(server_s, 1), bot_share=round(max(0.0, 1 - server_s / night.seconds), 3) if night.seconds else 0)


def _union(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by at least one of the ``(start, end)`` spans."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def _created(f: Path) -> float:
    """A server log's start: the time in its name (``server-YYYYmmddTHHMMSS-xxxx.log``, UTC)."""
    m = re.search(r"server-(\d{8}T\d{6})", f.name)
    if not m:
        return f.stat().st_mtime
    return datetime.strptime(m.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=timezone.utc).timestamp()
