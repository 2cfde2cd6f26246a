"""The real-vLLM lane's pieces (issue 22): the lane's Python, the tiny model, a vLLM server process,
an overlay with a planted prefill bug. Used by ``tests/vllm/conftest.py`` and ``benchmarks/vllm_lane.py``.

* :func:`lane_python`: the server venv's python (``scripts/vllm-lane.sh`` builds and caches it);
  ``BISECTBOT_VLLM_PYTHON`` names it (``scripts/test-all.sh`` sets it), else the newest cached lane.
* :func:`tiny_model`: a random-weight ``LlamaForCausalLM`` made by ``make_model.py`` with the lane's
  python from text on this machine (the README and the bot's own filler prompts: no download),
  cached under ``~/.cache/bisectbot/vllm-lane/models/<sha256 of script and text>/``.
* :class:`VllmServer`: ``python -m vllm.entrypoints.openai.api_server`` on a free loopback port,
  waited for on ``GET /health`` (the process's death ends the wait at once), stopped by its process group.
* :func:`planted_overlay`: a directory for ``PYTHONPATH`` whose ``sitecustomize.py`` puts its
  ``vllm/**.py`` first, holding vLLM's CPU attention backend with the planted chunked-prefill bug.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CACHE = Path(os.environ.get("BISECTBOT_VLLM_LANE_DIR") or Path.home() / ".cache" / "bisectbot" / "vllm-lane")
#: The planted bug's file, relative to the vllm package.
PLANTED_FILE = "v1/attention/backends/cpu_attn.py"
#: ``--max-num-batched-tokens`` of the lane's servers: prompts longer than this prefill in chunks,
#: so the planted bug (a continuation chunk loses its context) shows from this size on.
BATCH_TOKENS = 2048
#: ``--max-model-len``: four chunks of :data:`BATCH_TOKENS`, so every prompt shape the planted bug
#: knows (one chunk, a first continuation chunk, later ones) fits, and so does a probe's default
#: ``max_size``. Longer contexts test nothing more here and cost superlinear CPU time: a cold
#: request of ~32.7K prompt tokens took 74 s on an idle 2-core machine, one of ~8.7K 8.5 s, so the
#: suite's probes up to the server's limit ran 500-570 s each at 32768 (benchmarks/vllm_lane.py
#: sweeps whatever limit this says).
MAX_MODEL_LEN = 8192
#: Seconds a lane server may take to become healthy (measured: ~55 s on a loaded 2-core machine).
HEALTH_TIMEOUT_S = 420.0

ANCHOR = "        seq_lens = common_attn_metadata.seq_lens\n"
PLANT = ANCHOR + """\
        # chunked prefill: a continuation chunk's length counted without its context (the cached
        # prefix): it attends over as many keys as it has queries -- the first chunk's keys.
        query_lens = query_start_loc[1:] - query_start_loc[:-1]
        continuing = (query_lens > 1) & (seq_lens > query_lens)
        if bool(continuing.any()):
            seq_lens = torch.where(continuing, query_lens, seq_lens)
"""


class LaneMissing(RuntimeError):
    """The lane (its venv) is not built: run ``scripts/vllm-lane.sh``."""


def lane_python() -> Path:
    """The lane venv's python. Raises :class:`LaneMissing`."""
    env = os.environ.get("BISECTBOT_VLLM_PYTHON")
    if env:
        p = Path(env)
        if not p.exists():
            raise LaneMissing(f"BISECTBOT_VLLM_PYTHON={env} does not exist")
        return p
    built = sorted(CACHE.glob("*/ok"), key=lambda p: p.stat().st_mtime)
    for ok in reversed(built):
        p = ok.parent / "venv" / "bin" / "python"
        if p.exists():
            return p
    raise LaneMissing(f"no real-vLLM lane under {CACHE}: run scripts/vllm-lane.sh (or set BISECTBOT_VLLM_PYTHON)")


def vllm_package(py: Path) -> Path:
    """The installed ``vllm`` package directory of the lane venv at ``py``."""
    out = subprocess.run([str(py), "-c", "import importlib.util as u; print(u.find_spec('vllm').submodule_search_locations[0])"],
                         capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    return Path(out)


#: The tokenizer's text besides the filler prompts: the README as it was on 2026-12-05 (edc4c85), frozen.
#: The lane's model is made from its text, so reading the live README made every README edit a new model
#: whose replies the tests then compare (CI on 776ca0b: the repetition penalty no longer changed the reply
#: test_sampling_vllm checks).
CORPUS = HERE / "data" / "corpus.txt"


def training_text() -> str:
    """Local text for the tokenizer: :data:`CORPUS` and the bot's own filler prompts (3 seeds, ~20K tokens each)."""
    from bisectbot.reproduce.prompts import PromptBuilder

    parts = [CORPUS.read_text(encoding="utf-8")]
    for seed in range(3):
        p = PromptBuilder("What is 2+2?", needles=2, seed=seed).build(20000)
        parts.append("\n".join(m["content"] for m in p.messages))
    return "\n".join(parts)


def tiny_model(py: Path) -> Path:
    """The lane's tiny model directory (made once per script and text, then cached)."""
    text = training_text()
    script = HERE / "make_model.py"
    key = hashlib.sha256(script.read_bytes() + text.encode()).hexdigest()[:16]
    out = CACHE / "models" / key
    if (out / "ok").exists():
        return out
    tmp = CACHE / "models" / f"{key}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "train.txt").write_text(text, encoding="utf-8")
    subprocess.run([str(py), str(script), str(tmp / "train.txt"), str(tmp)], check=True, timeout=300,
                   capture_output=True)
    (tmp / "ok").write_text("made by tests/vllm/make_model.py\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def planted_overlay(py: Path, dest: Path, planted: bool = True) -> Path:
    """An overlay directory at ``dest``: ``sitecustomize.py`` and, when ``planted``, vLLM's
    ``cpu_attn.py`` with :data:`PLANT` (a copy of the installed file, edited). Returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "overlay_sitecustomize.py", dest / "sitecustomize.py")
    if planted:
        src = (vllm_package(py) / PLANTED_FILE).read_text(encoding="utf-8")
        if src.count(ANCHOR) != 1:
            raise RuntimeError(f"vllm/{PLANTED_FILE} changed: the planting anchor is not found once")
        target = dest / "vllm" / PLANTED_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(src.replace(ANCHOR, PLANT), encoding="utf-8")
    return dest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(overlay: Path | None = None, cpu: str | None = None) -> dict[str, str]:
    """The environment of a lane server: 2 GiB of KV cache, the overlay first on ``PYTHONPATH``,
    the OpenMP threads bound to ``cpu`` (a core id) when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BISECTBOT_", "PYTEST", "GITHUB_TOKEN"))}
    env.pop("PYTHONSAFEPATH", None)
    env["VLLM_CPU_KVCACHE_SPACE"] = "2"
    env["VLLM_NO_USAGE_STATS"] = "1"
    # the engine core in the API server's process: torch and vLLM are imported once, not twice (measured
    # on 2 loaded cores: healthy after 135 s instead of 197 s; the same replies and /metrics counters)
    env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    env["DO_NOT_TRACK"] = "1"
    env["HF_HUB_OFFLINE"] = "1"
    if cpu is not None:
        env["VLLM_CPU_OMP_THREADS_BIND"] = cpu
    if overlay is not None:
        env["PYTHONPATH"] = str(overlay)
    else:
        env.pop("PYTHONPATH", None)
    return env


#: vLLM's flags for the lane's tiny model, after ``--port``. Prefix caching stays on (vLLM's default).
#: ``--enforce-eager``: no torch.compile warm-up (measured on 2 loaded cores: healthy after ~43 s instead of
#: ~110-150 s, and the same prefill speed for this model: 2K tokens 0.3 s, 16K 2.6 s, 32K 7.8 s).
SERVE_FLAGS = ["--served-model-name", "tiny", "--max-model-len", str(MAX_MODEL_LEN), "--dtype", "bfloat16",
               "--max-num-batched-tokens", str(BATCH_TOKENS), "--enforce-eager"]


def server_args(model: Path, port: int, extra: list[str] | None = None) -> list[str]:
    """The lane python's arguments for a server of the tiny model on ``127.0.0.1:port``."""
    return ["-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "127.0.0.1",
            "--port", str(port), *SERVE_FLAGS, *(extra or [])]


class VllmServer:
    """One vLLM server process (see the module doc); ``url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self, py: Path, model: Path, log: Path, overlay: Path | None = None, cpu: str | None = None,
                 extra: list[str] | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.started_s = 0.0
        t0 = time.monotonic()
        self._t0 = t0
        self._fh = open(log, "wb")
        self.proc = subprocess.Popen([str(py), *server_args(model, self.port, extra)], stdout=self._fh,
                                     stderr=subprocess.STDOUT, env=server_env(overlay, cpu), start_new_session=True)

    def ready(self) -> VllmServer:
        """Wait until healthy (:data:`HEALTH_TIMEOUT_S`); stops the process and raises when it is not.
        ``started_s``: seconds from the start to the first healthy answer."""
        try:
            self._wait(HEALTH_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        self.started_s = time.monotonic() - self._t0
        return self

    def _wait(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM exited {self.proc.returncode} before it was healthy: {self.tail()}")
            try:
                if requests.get(self.url + "/health", timeout=5).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(1.0)
        raise RuntimeError(f"vLLM not healthy after {timeout_s:g} s: {self.tail()}")

    def tail(self, n: int = 1500) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def prefix_cache(self) -> tuple[int, int]:
        """``(hits, queries)`` of ``/metrics`` (prompt tokens since start)."""
        # read here, not with the bot's parser: the test's own measurement of what vLLM served
        sums = {"vllm:prefix_cache_hits_total": 0.0, "vllm:prefix_cache_queries_total": 0.0}
        for line in requests.get(self.url + "/metrics", timeout=10).text.splitlines():
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name in sums:
                sums[name] += float(line.rsplit(" ", 1)[1])
        return int(sums["vllm:prefix_cache_hits_total"]), int(sums["vllm:prefix_cache_queries_total"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
        self._fh.close()
