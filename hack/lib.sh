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

# One bin dir per tool version, so a version bump rebuilds only that tool.
tool_dir() { echo "$CACHE_DIR/tools/$1-$2"; }
KUBERNETES_BIN="$(tool_dir kubernetes "$KUBERNETES_VERSION")/bin"
ETCD_BIN="$(tool_dir etcd "$ETCD_VERSION")/bin"
KWOK_BIN="$(tool_dir kwok "$KWOK_VERSION")/bin"
HELM_BIN="$(tool_dir helm "$HELM_VERSION")/bin"
KWOK_STAGES="$(tool_dir kwok "$KWOK_VERSION")/stages"
TOOLS_PATH="$KUBERNETES_BIN:$ETCD_BIN:$KWOK_BIN:$HELM_BIN"

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
