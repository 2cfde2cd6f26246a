#!/usr/bin/env bash
# Register this host as a self-hosted GitHub Actions runner for bisectbot, scoped to ONE
# repository, running as a systemd service under a dedicated user that is in the docker,
# video and render groups. See runners/README.md for what the host needs first.
#
# Usage (as root):
#   RUNNER_REG_TOKEN=<registration token> runners/install-runner.sh --repo OWNER/REPO [options]
#
# The registration token (repository Settings -> Actions -> Runners -> New runner, or
# `gh api -X POST repos/OWNER/REPO/actions/runners/registration-token --jq .token`) is read from
# the environment, never from argv, and is never printed. It expires after one hour.
#
# Options:
#   --repo OWNER/REPO    repository the runner serves (required; org-wide runners are not used)
#   --labels LIST        extra labels, comma-separated (default: linux,mi355x; self-hosted is implicit)
#   --name NAME          runner name (default: bisectbot-$(hostname -s))
#   --user USER          service user (default: bisectbot)
#   --dir DIR            runner install directory (default: /opt/bisectbot-runner)
#   --state DIR          bisectbot ledger directory kept across jobs (default: /var/lib/bisectbot/state)
#   --hf-home DIR        Hugging Face cache shared by all jobs (default: /var/lib/bisectbot/hf)
#   --registry-mirror URL  fetch nightly images through this mirror of Docker Hub (or UPSTREAM=URL,...):
#                        written to .env as BISECTBOT_REGISTRY_MIRROR (http[s]://HOST[:PORT][/PREFIX])
#   --version X.Y.Z      actions/runner version (default: the latest release, asked from the GitHub API)
#   --tarball FILE       use a downloaded actions-runner-linux-x64-*.tar.gz instead of downloading
#   --sha256 HEX         expected SHA-256 of the tarball (checked when given)
#   --min-free-gb N      refuse to install with less free disk under --dir (default: min_free_gb of
#                        runners/mi355x.yaml, 2000; a CPU runner such as bisectbot-ledger: say 50)
#   --dry-run            print what would be done, change nothing
#   -h, --help           this help
set -euo pipefail

REPO="" LABELS="linux,mi355x" NAME="bisectbot-$(hostname -s)" RUSER="bisectbot"
DIR="/opt/bisectbot-runner" STATE="/var/lib/bisectbot/state" HF="/var/lib/bisectbot/hf"
VERSION="" TARBALL="" SHA256="" MIN_FREE_GB="" DRY=0 MIRROR=""

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "install-runner: error: $*" >&2; exit 2; }
run() { if [ "$DRY" = 1 ]; then printf '+ %s\n' "$*"; else "$@"; fi; }
warn() { echo "install-runner: warning: $*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --repo) REPO="${2:?}"; shift 2 ;;
    --labels) LABELS="${2:?}"; shift 2 ;;
    --name) NAME="${2:?}"; shift 2 ;;
    --user) RUSER="${2:?}"; shift 2 ;;
    --dir) DIR="${2:?}"; shift 2 ;;
    --state) STATE="${2:?}"; shift 2 ;;
    --hf-home) HF="${2:?}"; shift 2 ;;
    --registry-mirror) MIRROR="${2:?}"; shift 2 ;;
    --version) VERSION="${2:?}"; shift 2 ;;
    --tarball) TARBALL="${2:?}"; shift 2 ;;
    --sha256) SHA256="${2:?}"; shift 2 ;;
    --min-free-gb) MIN_FREE_GB="${2:?}"; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done

[[ "$REPO" =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]] || die "--repo OWNER/REPO is required (got '${REPO}')"
[[ "$LABELS" =~ ^[A-Za-z0-9_.,-]+$ ]] || die "--labels must be comma-separated words"
[ -z "$MIRROR" ] || [[ "$MIRROR" =~ ^[A-Za-z0-9_.:/=,-]+$ ]] || die "--registry-mirror must be URL or UPSTREAM=URL,... (got '${MIRROR}')"
[[ "$RUSER" =~ ^[a-z_][a-z0-9_-]{0,31}$ ]] || die "--user '$RUSER' is not a valid user name"
[ "$DRY" = 1 ] || [ "$(id -u)" = 0 ] || die "run as root (or with --dry-run)"
[ "$DRY" = 1 ] || [ -n "${RUNNER_REG_TOKEN:-}" ] || die "set RUNNER_REG_TOKEN to a registration token of $REPO"

# the one figure: the GPU profile's min_free_gb (what `bisectbot runner check` checks, too)
if [ -z "$MIN_FREE_GB" ]; then
  MIN_FREE_GB=$(sed -n 's/^min_free_gb:[[:space:]]*\([0-9][0-9]*\).*/\1/p' "$(dirname "$0")/mi355x.yaml" 2>/dev/null | head -n1)
  [ -n "$MIN_FREE_GB" ] || die "no min_free_gb in $(dirname "$0")/mi355x.yaml: pass --min-free-gb N"
fi
[[ "$MIN_FREE_GB" =~ ^[0-9]+$ ]] || die "--min-free-gb must be a whole number of GB (got '${MIN_FREE_GB}')"

# ---------------------------------------------------------------- host checks (warnings in dry runs)
check() { if [ "$DRY" = 1 ]; then warn "$1"; else die "$1"; fi; }
GPU=0; [[ ",$LABELS," == *",mi355x,"* ]] && GPU=1   # a CPU runner (e.g. bisectbot-ledger) needs no GPU
if [ "$GPU" = 1 ]; then
  [ -e /dev/kfd ] || check "/dev/kfd missing: install the ROCm driver (amdgpu-dkms) and reboot"
  [ -d /dev/dri ] || check "/dev/dri missing: no GPU render nodes"
fi
command -v docker >/dev/null 2>&1 || check "docker missing: install Docker Engine (docker.io or docker-ce)"
command -v python3 >/dev/null 2>&1 || check "python3 missing: apt-get install python3 python3-venv"
python3 -c 'import venv, ensurepip' 2>/dev/null || check "python3-venv missing: apt-get install python3-venv"
[ "$GPU" = 0 ] || command -v amd-smi >/dev/null 2>&1 || command -v rocm-smi >/dev/null 2>&1 || warn "neither amd-smi nor rocm-smi found"
for g in docker video render; do getent group "$g" >/dev/null || check "group '$g' missing (docker / ROCm packages create it)"; done
parent="$DIR"; while [ ! -d "$parent" ]; do parent="$(dirname "$parent")"; done
free_gb=$(( $(df -Pk "$parent" | awk 'NR==2 {print $4}') * 1024 / 1000000000 ))   # GB (10^9), as runner check
[ "$free_gb" -ge "$MIN_FREE_GB" ] || check "only ${free_gb} GB free under $parent (< ${MIN_FREE_GB} GB: min_free_gb of runners/mi355x.yaml, or --min-free-gb): images and models need room"

# ---------------------------------------------------------------- user and directories
if ! id "$RUSER" >/dev/null 2>&1; then
  run useradd --system --create-home --home-dir "/home/$RUSER" --shell /bin/bash "$RUSER"
fi
run usermod -aG docker,video,render "$RUSER"
run install -d -o "$RUSER" -g "$RUSER" -m 0750 "$DIR" "$STATE" "$HF"

# ---------------------------------------------------------------- runner package
if [ -z "$TARBALL" ]; then
  if [ -z "$VERSION" ]; then
    if [ "$DRY" = 1 ]; then VERSION="X.Y.Z"; else
      VERSION=$(curl -fsSL https://api.github.com/repos/actions/runner/releases/latest \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["tag_name"].lstrip("v"))')
    fi
  fi
  TARBALL="/tmp/actions-runner-linux-x64-${VERSION}.tar.gz"
  run curl -fsSL -o "$TARBALL" \
    "https://github.com/actions/runner/releases/download/v${VERSION}/actions-runner-linux-x64-${VERSION}.tar.gz"
fi
if [ -n "$SHA256" ]; then
  if [ "$DRY" = 1 ]; then echo "+ sha256sum -c ($SHA256 $TARBALL)"; else
    echo "$SHA256  $TARBALL" | sha256sum -c - >/dev/null || die "SHA-256 of $TARBALL does not match"
  fi
fi
run tar -xzf "$TARBALL" -C "$DIR"
run chown -R "$RUSER:$RUSER" "$DIR"
if [ "$DRY" = 0 ]; then "$DIR/bin/installdependencies.sh" >/dev/null; else echo "+ $DIR/bin/installdependencies.sh"; fi

# Environment every job sees (the runner reads .env in its directory).
envfile="BISECTBOT_STATE=$STATE
HF_HOME=$HF
XDG_CACHE_HOME=/home/$RUSER/.cache"
[ -z "$MIRROR" ] || envfile="$envfile
BISECTBOT_REGISTRY_MIRROR=$MIRROR"
if [ "$DRY" = 1 ]; then printf '+ write %s/.env:\n%s\n' "$DIR" "$envfile"; else
  printf '%s\n' "$envfile" > "$DIR/.env"; chown "$RUSER:$RUSER" "$DIR/.env"
fi

# ---------------------------------------------------------------- register (token via env, never echoed)
cfg=(./config.sh --unattended --replace --url "https://github.com/$REPO" --name "$NAME" --labels "$LABELS"
     --work _work)
if [ "$DRY" = 1 ]; then
  echo "+ cd $DIR && sudo -u $RUSER ${cfg[*]} --token ***"
else
  (cd "$DIR" && sudo -u "$RUSER" --preserve-env=RUNNER_REG_TOKEN bash -c '"$@" --token "$RUNNER_REG_TOKEN"' _ "${cfg[@]}")
fi

# ---------------------------------------------------------------- systemd service under the dedicated user
if [ "$DRY" = 1 ]; then
  echo "+ cd $DIR && ./svc.sh install $RUSER && ./svc.sh start"
else
  (cd "$DIR" && ./svc.sh install "$RUSER" && ./svc.sh start)
fi
if [ "$DRY" = 1 ]; then
  echo "install-runner: dry run: runner '$NAME' for $REPO with labels self-hosted,$LABELS would be installed as a service of user $RUSER (nothing was changed)"
else
  echo "install-runner: runner '$NAME' for $REPO with labels self-hosted,$LABELS installed as a service of user $RUSER"
fi
