"""Per-probe cost of the candidate sandbox (issue 36): the same bisection with and without it.

Usage: ``python benchmarks/sandbox_overhead.py [--repeats N]``

Builds one history of the reference engine (16 commits, command reproducer: a build command and
one reproducer process per probe, the local runner's two candidate processes), then runs
``bisectbot run`` on it ``N`` times with the sandbox (bubblewrap) and ``N`` times with
``BISECTBOT_SANDBOX=off``, alternating, each on a fresh state directory. Prints the median
wall time per probe of each, their ratio, the added seconds per probe, and those seconds as a
share of a real-vLLM lane probe (40.5 s on the H200, 65-138 s on the CPU lane: TOOLING.md).
Also the bare cost of one sandboxed process start (``bwrap ... true`` against ``true``), and the
cost of the network bridge (a server candidate in its own network namespace, reached through the
bot's forwarder and the one inside the sandbox): the same engine server started by the local
runner with ``server.network: loopback`` (the bridge) and ``host`` (no bridge), the median time of
one request of each kind, and the same bisection over a server (prefill) reproducer with each,
per probe.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))

from tests.bisect.conftest import make_engine_repo, write_recipe  # noqa: E402

REAL_PROBE_S = 40.5  # a real vLLM probe on the H200 (TOOLING.md, "A real probe's time")


def one_run(recipe: Path, work: Path, sandbox: bool, n: int) -> tuple[float, int]:
    """(wall seconds, probes) of one ``bisectbot run`` on a fresh state directory."""
    state, out = work / f"state-{n}", work / f"out-{n}"
    env = {**os.environ, "ENGINE_STARTS": "/dev/null", "BISECTBOT_SANDBOX": "on" if sandbox else "off"}
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(state), "run", str(recipe),
                        "--out", str(out)], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"run failed (exit {p.returncode}):\n{p.stderr[-2000:]}")
    stages = json.loads((out / "result.json").read_text()).get("stages", [])
    probes = sum(len(st.get("probes") or []) for st in stages) or 1
    return wall, probes


def spawn_cost(reps: int = 30) -> tuple[float, float]:
    """Median seconds of ``true`` and of ``true`` inside the sandbox's namespaces."""
    from bisectbot import sandbox

    argv, env = sandbox.wrap(["true"], tree=tempfile.gettempdir(), env=dict(os.environ))
    out = []
    for cmd in (["true"], argv):
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            subprocess.run(cmd, env=env, check=True)
            ts.append(time.perf_counter() - t0)
        out.append(statistics.median(ts))
    return out[0], out[1]


def one_server_run(recipe: Path, work: Path, network: str, n: int) -> tuple[float, int]:
    """(wall seconds, probes) of ``bisectbot run`` over a server reproducer, ``server.network``
    ``network``, sandbox on."""
    import yaml

    data = yaml.safe_load(recipe.read_text())
    data["server"]["network"] = network
    rec = work / f"r-{network}.yaml"
    rec.write_text(yaml.safe_dump(data, sort_keys=False))
    return one_run(rec, work, True, n)


def request_cost(work: Path, reps: int = 40) -> dict[str, dict[str, float]]:
    """Median seconds per request (``GET /health`` on a kept connection, ``GET /health`` on a new
    connection, a chat request of about 2000 prompt tokens) to the engine's server through the
    bridge (``loopback``) and without it (``host``)."""
    import requests

    from bisectbot.models import Candidate, CandidateKind
    from bisectbot.recipe import load_recipe
    from bisectbot.reproduce.client import Client
    from bisectbot.run.local import LocalRunner

    os.environ.setdefault("ENGINE_STARTS", "/dev/null")
    repo = make_engine_repo(work / "repo-req", n=1, k=1)
    prompt = " ".join(f"word{i % 97}" for i in range(2000))
    out: dict[str, dict[str, float]] = {}
    for net in ("host", "loopback"):
        recipe = load_recipe(write_recipe(work / f"req-{net}.yaml", repo, work / "out-req", server={"network": net}))
        r = LocalRunner(recipe, {"engine": repo.path}, workdir=work / f"wt-{net}")
        prep = r.prepare(Candidate(CandidateKind.COMMIT, repo.shas[0], "c0", "engine"))
        try:
            with r.server(prep) as srv:
                kept, fresh, chat = [], [], []
                http = requests.Session()
                client = Client(srv.base_url, timeout_s=60)
                client.chat([{"role": "user", "content": "warm up"}], max_tokens=8)
                for _ in range(reps):
                    t0 = time.perf_counter()
                    http.get(srv.base_url + "/health", timeout=10).raise_for_status()
                    kept.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    requests.get(srv.base_url + "/health", timeout=10).raise_for_status()
                    fresh.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    rep = client.chat([{"role": "user", "content": prompt}], max_tokens=64)
                    chat.append(time.perf_counter() - t0)
                    if rep.error:
                        raise SystemExit(f"chat failed through {net}: {rep.error}")
                out[net] = {"kept": statistics.median(kept), "fresh": statistics.median(fresh),
                            "chat": statistics.median(chat)}
        finally:
            r.release(prep)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bisectbot-sandbox-bench-") as d:
        work = Path(d)
        repo = make_engine_repo(work / "repo", n=16, k=11)
        recipe = write_recipe(work / "r.yaml", repo, work / "out", mode="command")
        per = {True: [], False: []}
        n = 0
        for _ in range(args.repeats):
            for sb in (False, True):
                wall, probes = one_run(recipe, work, sb, n)
                per[sb].append(wall / probes)
                n += 1
        off, on = statistics.median(per[False]), statistics.median(per[True])
        bare, boxed = spawn_cost()
        req = request_cost(work)
        srecipe = write_recipe(work / "rs.yaml", repo, work / "out-s")
        sper: dict[str, list[float]] = {"host": [], "loopback": []}
        for _ in range(args.repeats):
            for net in ("host", "loopback"):
                wall, probes = one_server_run(srecipe, work, net, n)
                sper[net].append(wall / probes)
                n += 1
        shost, sloop = statistics.median(sper["host"]), statistics.median(sper["loopback"])
    added = on - off
    print(f"per probe (median of {args.repeats} runs, 16-commit history, build + reproducer per probe)")
    print(f"  sandbox off: {off * 1000:8.1f} ms")
    print(f"  sandbox on:  {on * 1000:8.1f} ms   ratio {on / off:.2f}x, +{added * 1000:.1f} ms per probe")
    print(f"  share of a real vLLM probe ({REAL_PROBE_S} s): {added / REAL_PROBE_S * 100:.3f} %")
    print(f"one process start: true {bare * 1000:.1f} ms, in the sandbox {boxed * 1000:.1f} ms")
    print("network bridge (sandbox on; server.network host = no bridge, loopback = bridge), median per request:")
    for kind, what in (("kept", "GET /health, kept connection"), ("fresh", "GET /health, new connection"),
                       ("chat", "chat, ~2000-word prompt, 64 tokens")):
        h, lo = req["host"][kind], req["loopback"][kind]
        print(f"  {what:36s} host {h * 1000:7.2f} ms, bridge {lo * 1000:7.2f} ms (+{(lo - h) * 1000:.2f} ms)")
    sadded = sloop - shost
    print(f"server-reproducer probe (median of {args.repeats} runs): host {shost * 1000:.0f} ms, bridge "
          f"{sloop * 1000:.0f} ms, ratio {sloop / shost:.2f}x, {sadded * 1000:+.0f} ms per probe = "
          f"{sadded / REAL_PROBE_S * 100:.3f} % of a real vLLM probe")


if __name__ == "__main__":
    main()
