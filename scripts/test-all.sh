#!/usr/bin/env bash
# README command 2: install what the tests need, start the services they use
# (dockerd, a local registry on 127.0.0.1:5000) and run the whole suite.
# Fresh Debian/Ubuntu as root (or with sudo). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

need=()
for pair in dockerd:docker.io docker-registry:docker-registry debootstrap:debootstrap patch:patch git:git curl:curl; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair##*:}")
done
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  echo "test-all: installing ${need[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e '.[test]'

$SUDO bash scripts/services.sh

export BISECTBOT_REQUIRE_DOCKER=1
export PATH="$PWD/.venv/bin:$PATH"
ruff check .
exec python -m pytest "$@"
