#!/usr/bin/env bash
# README command 2: install what the tests need, start the services they use
# (dockerd, a local registry on 127.0.0.1:5000) and run the whole suite AGAINST THE
# INSTALLED WHEEL, as a user gets it:
#   1. build a wheel from a clean copy of the checkout (tracked + new unignored files;
#      no stale build/ or egg-info can leak into it),
#   2. install it non-editable with the test extras in a fresh virtualenv (.venv-test),
#   3. run pytest from the checkout with PYTHONSAFEPATH=1, so neither pytest nor the
#      `python -m bisectbot` children import the checkout's bisectbot/ (a test asserts
#      bisectbot.__file__ lies under site-packages), on $BISECTBOT_TEST_WORKERS (default 2)
#      pytest-xdist workers, one test file per worker at a time (--dist loadfile).
# Fresh Debian/Ubuntu as root (or with sudo). Extra arguments go to pytest
# (e.g. `./scripts/test-all.sh tests/patches -x`; `-n 0` runs without xdist).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

need=()
# chromium + chromedriver: tests/dashboard open the rendered site in a real headless browser;
# bubblewrap: candidates of the local runner run in its sandbox (bisectbot/sandbox.py)
for pair in dockerd:docker.io docker-registry:docker-registry debootstrap:debootstrap patch:patch git:git curl:curl bwrap:bubblewrap \
            chromium:chromium chromedriver:chromium-driver; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair##*:}")
done
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  echo "test-all: installing ${need[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

# 0. the real-vLLM lane's server venv (issue 22), in the background while the wheel, the test venv
#    and the services are made: scripts/vllm-lane.sh builds it once per pin change and caches it
#    under ~/.cache/bisectbot/vllm-lane/ (~2.5 min on a loaded 2-core machine; cached: 0 s).
work=$(mktemp -d "${TMPDIR:-/tmp}/bisectbot-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
lane_log=$work/vllm-lane.log
if [ "${BISECTBOT_VLLM_LANE:-1}" != 0 ]; then
  bash scripts/vllm-lane.sh >"$lane_log" 2>&1 &
  lane_pid=$!
fi

# 1. the wheel, from a clean copy of the checkout
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mkdir -p "$work/src"
  git -C "$ROOT" ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    [ -e "$f" ] && cp -P --parents -- "$f" "$work/src/"
  done
else
  cp -a "$ROOT" "$work/src"; rm -rf "$work/src/build" "$work/src/.venv" "$work/src/.venv-test"
fi
echo "test-all: building the wheel"
python3 -m venv "$work/build-venv"
"$work/build-venv/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
"$work/build-venv/bin/python" -m pip wheel -q --no-deps -w "$work/dist" "$work/src"
wheel=$(ls "$work"/dist/bisectbot-*.whl)

# 2. a fresh virtualenv with the wheel (non-editable) and the test extras
VENV=$ROOT/.venv-test
echo "test-all: installing $(basename "$wheel") into a fresh $VENV"
python3 -m venv --clear "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
"$VENV/bin/python" -m pip install -q "$wheel[test]"

$SUDO bash scripts/services.sh

# the lane: its python for tests/vllm (which fail, never skip, when it is missing: BISECTBOT_REQUIRE_VLLM)
# (BISECTBOT_VLLM_LANE=0 builds no lane: tests/vllm then skip, as on a developer's machine without it)
if [ -n "${lane_pid:-}" ]; then
  export BISECTBOT_REQUIRE_VLLM=1
  if wait "$lane_pid"; then
    BISECTBOT_VLLM_PYTHON=$(tail -n 1 "$lane_log"); export BISECTBOT_VLLM_PYTHON
    echo "test-all: real-vLLM lane $BISECTBOT_VLLM_PYTHON ($(grep -m1 -o 'built in [0-9]* s\|cached' "$lane_log"))"
  else
    echo "test-all: the real-vLLM lane failed to build (tests/vllm will fail):" >&2; tail -n 30 "$lane_log" >&2
  fi
fi

# the real vLLM nightlies' base image (tests/vllm/images.py, issue 38: ~2.3 GB, ~1.5-3 min cold) in the
# background while the suite starts: building it is mostly disk and daemon work, and
# tests/vllm/test_real_night.py waits on the same lock instead of building it a second time
if [ -n "${BISECTBOT_VLLM_PYTHON:-}" ]; then
  "$VENV/bin/python" -m tests.vllm.images >"$work/vllm-base.log" 2>&1 &
fi

# 3. the suite against the install
export BISECTBOT_REQUIRE_DOCKER=1
export BISECTBOT_TEST_INSTALLED=1   # tests/test_installed.py: bisectbot must come from site-packages
export PYTHONSAFEPATH=1             # never put the checkout (cwd) on sys.path
export PATH="$VENV/bin:$PATH"
ruff check .
# --no-loadscope-reorder: keep the collection order tests/conftest.py sets (the longest files first);
# xdist otherwise hands out files by their number of tests, so the 3-test real night (~15 min) started
# 40 minutes into a CI run and ran alone at its end
par=(-n "${BISECTBOT_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder --durations=40)
if [ $# -gt 0 ]; then exec python -m pytest "${par[@]}" "$@"; fi
# The whole suite: everything but the `quiet` tests on the workers, then the `quiet` ones alone (a
# measured-performance verdict on real processes compares samples drawn minutes apart; with a
# neighbour's tests on the same 2 cores the host's speed moves between them, as on a shared runner).
rc=0
python -m pytest "${par[@]}" -m "not quiet" || rc=$?
python -m pytest -n 0 --durations=5 -m quiet || { r=$?; [ "$rc" != 0 ] || rc=$r; }
exit "$rc"
