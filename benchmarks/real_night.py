"""The cost of a night over real vLLM nightly images (issue 38).

Usage: ``python benchmarks/real_night.py [--json] [--keep-local]`` (needs the lane,
``scripts/vllm-lane.sh``, and the services, ``scripts/services.sh``: dockerd and the registry on
127.0.0.1:5000). The same fixture and night as ``tests/vllm/test_real_night.py``
(``tests/vllm/images.py``, ``tests/vllm/real_night.py``).

Before the night the nightly tags are removed from the local daemon (unless ``--keep-local``), so
the runner pulls them as a runner host would; their lower layers are the base image's, which the
host keeps (a runner keeps yesterday's layers), so the pull moves the overlay layers only.

Printed:

* **fixture**: seconds to ensure the base image (0 when cached) and to build and push the nightlies;
* **the night** (``bisectbot run``): wall seconds, the status and the culprit;
* **images built**: the builds of the night (the patch stack on a nightly, or an overlay commit on
  the last-good nightly), from the build logs;
* **bytes pulled**: blob bytes the local registry served during the night (its access log);
* **server starts**: every vLLM container (probes, the last-good reference, the calibration
  build) with the version each printed;
* **seconds per probe** (server start included) and **the bot's share**: the time no vLLM server
  was up (builds, the image diff, the bot's own work) over the night.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.vllm import images, lane  # noqa: E402
from tests.vllm import real_night as rn  # noqa: E402

REGISTRY = "127.0.0.1:5000"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep-local", action="store_true", help="leave the nightly tags in the daemon (no pull)")
    args = ap.parse_args()
    py = lane.lane_python()
    model = lane.tiny_model(py)
    t0 = time.monotonic()
    base = images.ensure_vllm_base(py)
    base_s = time.monotonic() - t0
    with tempfile.TemporaryDirectory(prefix="bisectbot-real-night-") as tmp:
        tmpd = Path(tmp)
        shas = images.make_history(py, tmpd / "vllm")
        repository = f"bisectbot-test/vllm-dev-{uuid.uuid4().hex[:8]}"
        t1 = time.monotonic()
        pushed = images.push_vllm_nightlies(py, base, tmpd / "vllm", shas, rn.NIGHTLIES, repository, REGISTRY)
        push_s = time.monotonic() - t1
        try:
            if not args.keep_local:
                for p in pushed:
                    subprocess.run(["docker", "rmi", p.ref], capture_output=True)
            n0, n1, _n2, n3 = pushed
            out, state = tmpd / "out", tmpd / "state"
            data = rn.recipe(REGISTRY, repository, tmpd / "vllm", model, out, good=n1.tag, bad=n3.tag,
                             calibrate_with=n0.tag)
            night = rn.run_night(rn.write_recipe(tmpd / "recipe.yaml", data), state, out, timeout=3600)
            cost = rn.night_cost(night, state, data["name"], repository)
            final = (night.result.get("stages") or [{}])[-1]
            fb = (final.get("first_bad") or {}).get("ref", "")
            doc = {"base_s": round(base_s, 1), "push_s": round(push_s, 1), "status": night.result.get("status"),
                   "culprit_is_planted": fb == shas[images.PLANTED], **cost.to_dict()}
        finally:
            for p in pushed:
                subprocess.run(["docker", "rmi", "-f", p.ref], capture_output=True)
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    print(f"fixture: base image {doc['base_s']:.0f} s (0 when cached), 4 nightlies built and pushed {doc['push_s']:.0f} s")
    print(f"night: {doc['seconds']:.0f} s, status {doc['status']}, planted commit named: {doc['culprit_is_planted']}")
    print(f"images built: {doc['images_built']}")
    print(f"bytes pulled: {doc['bytes_pulled']:,}")
    print(f"server starts: {doc['server_starts']} ({', '.join(doc['versions'])})")
    ps = doc["probe_s"]
    if ps:
        print(f"probes: {doc['probes']}, seconds per probe: median {statistics.median(ps):.1f} "
              f"(min {min(ps):.1f}, max {max(ps):.1f})")
    print(f"a vLLM server up: {doc['server_s']:.0f} s of {doc['seconds']:.0f} s; the bot's share {doc['bot_share']:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
