#!/usr/bin/env bash
# Start the services the tests use when they are not already running:
#   * dockerd (Debian package docker.io)
#   * a Docker registry on 127.0.0.1:${BISECTBOT_REGISTRY_PORT:-5000} (Debian package docker-registry)
# Idempotent. Logs under ${BISECTBOT_SERVICES_DIR:-${TMPDIR:-/tmp}/bisectbot-services}.
set -euo pipefail
dir=${BISECTBOT_SERVICES_DIR:-${TMPDIR:-/tmp}/bisectbot-services}
port=${BISECTBOT_REGISTRY_PORT:-5000}
mkdir -p "$dir"

if ! docker info >/dev/null 2>&1; then
  if ! command -v dockerd >/dev/null; then
    echo "services: dockerd not installed (apt-get install docker.io)" >&2; exit 1
  fi
  # A dockerd killed earlier leaves its pid file; a new one refuses to start while it exists.
  for pidfile in /var/run/docker.pid /run/docker.pid; do
    if [ -f "$pidfile" ] && ! kill -0 "$(cat "$pidfile" 2>/dev/null)" 2>/dev/null; then
      echo "services: removing stale $pidfile"; rm -f "$pidfile"
    fi
  done
  echo "services: starting dockerd (log $dir/dockerd.log)"
  nohup dockerd >"$dir/dockerd.log" 2>&1 &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "services: dockerd did not start; last log lines:" >&2; tail -20 "$dir/dockerd.log" >&2; exit 1; }
fi

if ! curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1; then
  reg=$(command -v docker-registry || true)
  [ -n "$reg" ] || { echo "services: docker-registry not installed (apt-get install docker-registry)" >&2; exit 1; }
  mkdir -p "$dir/registry-data"
  cat >"$dir/registry.yml" <<YML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/registry-data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
YML
  echo "services: starting registry on 127.0.0.1:$port (log $dir/registry.log)"
  nohup "$reg" serve "$dir/registry.yml" >"$dir/registry.log" 2>&1 &
  for _ in $(seq 1 30); do curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break; sleep 1; done
  curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null || { echo "services: registry did not start" >&2; tail -20 "$dir/registry.log" >&2; exit 1; }
fi
command -v docker-init >/dev/null || echo "services: warning: docker-init (tini) missing; runner profiles need 'init: false'" >&2
echo "services: dockerd and registry 127.0.0.1:$port up"
