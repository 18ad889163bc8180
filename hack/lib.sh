# Shared settings for the hack/ scripts. Source it; do not run it.
#
# AGENT_SUPERVISOR_CACHE  where built tools are kept, outside the repo
#                         (default: ${XDG_CACHE_HOME:-$HOME/.cache}/agent-supervisor)

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_DIR="${AGENT_SUPERVISOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-supervisor}"

# Pinned versions; each must match the go.mod under tools/<name>/.
KUBERNETES_VERSION="v1.36.3"
ETCD_VERSION="v3.6.16"
KWOK_VERSION="v0.8.0"
HELM_VERSION="v3.22.0"
PROMETHEUS_VERSION="v3.15.0" # promtool; its Go module is v0.315.0
AGENT_SANDBOX_VERSION="v1.0.1"

# One bin dir per tool version, so a version bump rebuilds only that tool.
tool_dir() { echo "$CACHE_DIR/tools/$1-$2"; }
KUBERNETES_BIN="$(tool_dir kubernetes "$KUBERNETES_VERSION")/bin"
ETCD_BIN="$(tool_dir etcd "$ETCD_VERSION")/bin"
KWOK_BIN="$(tool_dir kwok "$KWOK_VERSION")/bin"
HELM_BIN="$(tool_dir helm "$HELM_VERSION")/bin"
PROMETHEUS_BIN="$(tool_dir prometheus "$PROMETHEUS_VERSION")/bin"
KWOK_STAGES="$(tool_dir kwok "$KWOK_VERSION")/stages"
# kubernetes-sigs/agent-sandbox's controller and its CRDs, run by hack/cluster.sh when AGENT_SANDBOX=1.
AGENT_SANDBOX_BIN="$(tool_dir agent-sandbox "$AGENT_SANDBOX_VERSION")/bin"
AGENT_SANDBOX_CRDS="$(tool_dir agent-sandbox "$AGENT_SANDBOX_VERSION")/crds"
# The real node's kubelet: the same Kubernetes version, a module of their own
# (tools/node) so that adding it never rebuilds the control plane.
NODE_BIN="$(tool_dir node "$KUBERNETES_VERSION")/bin"
# The real node's images (hack/image.sh node-images), imported into its containerd at start.
IMAGES_DIR="$CACHE_DIR/images"
TOOLS_PATH="$KUBERNETES_BIN:$ETCD_BIN:$KWOK_BIN:$HELM_BIN:$PROMETHEUS_BIN"

# A loopback port free right now.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# sdk_venv: makes (once) or reuses the Python SDK's virtualenv and prints its python. The
# virtualenv holds exactly the pins of sdk/python/requirements-dev.txt (pytest, ruff, lightkube,
# langgraph, ...; not the SDK itself: `hack/sdk.sh` installs its wheel) and lives in the cache,
# one per set of pins and Python version: $CACHE_DIR/venv/sdk-<hash>.
#
# SDK_PYTHON  the interpreter to make it with (default: python3; Python >= 3.10)
sdk_venv() {
  local python="${SDK_PYTHON:-python3}" requirements="$REPO_ROOT/sdk/python/requirements-dev.txt"
  local key venv
  command -v "$python" >/dev/null || die "no $python: install Python >= 3.10 (or set SDK_PYTHON)"
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
    die "the SDK needs Python >= 3.10; $python is $("$python" -V 2>&1)"
  key="$({ cat "$requirements"; "$python" -c 'import sys; print(sys.version)'; } |
    sha256sum | cut -c1-16)"
  venv="$CACHE_DIR/venv/sdk-$key"
  mkdir -p "$CACHE_DIR/venv"
  # Two runs at once make the virtualenv once.
  (
    flock 9
    if [[ ! -f "$venv/.complete" ]]; then
      log "making the SDK's virtualenv (pinned requirements) at $venv"
      rm -rf "$venv"
      "$python" -m venv "$venv" ||
        die "$python -m venv failed: install the venv module (Debian: python3-venv)"
      # Exactly the pins, nothing resolved: `pip check` (hack/sdk.sh) says if one is missing.
      "$venv/bin/python" -m pip --disable-pip-version-check --no-input --quiet install \
        --no-deps --require-virtualenv -r "$requirements" || die "installing the SDK's pins failed"
      touch "$venv/.complete"
    fi
  ) 9>"$venv.lock" || exit 1
  echo "$venv/bin/python"
}

# sdk_pythons: the lowest and the newest Python the SDK's tests also run on (it claims >= 3.10):
# SDK_PYTHONS if set, else pyenv's newest 3.10 and its newest 3.x. Fails when there is no 3.10.
sdk_pythons() {
  if [[ -n "${SDK_PYTHONS:-}" ]]; then
    echo "$SDK_PYTHONS"
    return 0
  fi
  local root="${PYENV_ROOT:-$HOME/.pyenv}/versions" lowest newest
  lowest=$(printf '%s\n' "$root"/3.10.*/bin/python3.10 | sort -V | tail -n 1)
  newest=$(printf '%s\n' "$root"/3.*/bin/python3 | sort -V | tail -n 1)
  [[ -x "$lowest" && -x "$newest" ]] ||
    die "no Python 3.10 (or none newer) under $root: the SDK claims 3.10; set SDK_PYTHONS to the interpreters to test on"
  echo "$lowest $newest"
}

# is_ours PID NAME: PID is alive and runs the program NAME (so a stale pid file, whose pid the
# system has since given to another process, is never acted on).
is_ours() {
  local pid=$1 name=$2 exe
  [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
  # (A process that exits between the check and the read leaves nothing to read: not ours.)
  exe=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n 1)
  [[ "$(basename -- "$exe")" == "$name" ]]
}

# stop_ours PID NAME: SIGTERM, up to 5s to exit, then SIGKILL — only if PID is still NAME.
stop_ours() {
  local pid=$1 name=$2
  is_ours "$pid" "$name" || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do is_ours "$pid" "$name" || return 0; sleep 0.1; done
  is_ours "$pid" "$name" && kill -9 "$pid" 2>/dev/null || true
}
