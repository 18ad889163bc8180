#!/usr/bin/env bash
# Builds the pinned control-plane tools from the Go module proxy and caches them by version.
#
#   hack/tools.sh            build whatever is missing or stale
#   hack/tools.sh --print    print the bin dirs, one per line
#
# Each tool is a throwaway Go module under tools/<name>/ whose go.mod and go.sum pin every
# dependency, so builds are reproducible and verified against go.sum. A tool is rebuilt only
# when its go.mod, go.sum or build flags change.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ "${1:-}" == "--print" ]]; then
  tr ':' '\n' <<<"$TOOLS_PATH"
  exit 0
fi

command -v go >/dev/null || die "go is not installed; the tools are built from Go modules"

export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly -trimpath"

# build NAME VERSION OUT_DIR LDFLAGS PKG[=BINARY]...
build() {
  local name=$1 version=$2 out=$3 ldflags=$4
  shift 4
  local mod="$REPO_ROOT/tools/$name" stamp log
  stamp="$(dirname "$out")/.stamp"
  log="$(dirname "$out")/build.log"
  local want
  want="$(cat "$mod/go.mod" "$mod/go.sum" <(echo "$ldflags $*" ) | sha256sum | cut -d' ' -f1)"
  local spec present=1
  for spec in "$@"; do
    [[ "$spec" == *=* ]] && spec=${spec#*=} || spec=${spec##*/}
    [[ -x "$out/$spec" ]] || present=0
  done
  if [[ $present == 1 && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    log "$name $version: cached in $(dirname "$out")"
    return 0
  fi
  mkdir -p "$out"
  rm -f "$stamp"
  log "$name $version: building (cold builds take minutes; log: $log)"
  local start=$SECONDS pkg bin
  : >"$log"
  for spec in "$@"; do
    pkg=${spec%%=*}
    bin=${spec#*=}
    [[ "$bin" == "$spec" ]] && bin=${pkg##*/}
    # -v prints each package as it compiles: the count is the progress shown below.
    (cd "$mod" && go build -v -ldflags "$ldflags" -o "$out/$bin" "$pkg") >>"$log" 2>&1 &
    local pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      sleep 20
      kill -0 "$pid" 2>/dev/null &&
        log "$name: $bin still building, $(wc -l <"$log") packages compiled, $((SECONDS - start))s"
    done
    if ! wait "$pid"; then
      printf 'error: building %s %s (%s) failed; last lines of %s:\n' "$name" "$version" "$bin" "$log" >&2
      tail -n 30 "$log" >&2
      exit 1
    fi
  done
  echo "$want" >"$stamp"
  log "$name $version: built in $((SECONDS - start))s"
}

k8s_ldflags() {
  local v=$KUBERNETES_VERSION major minor flags="-s -w"
  major=${v#v}; major=${major%%.*}
  minor=${v#v*.}; minor=${minor%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    flags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$flags"
}

# kwok's simulated kubelet behaviour comes as Stage manifests inside its (pinned) module: the
# fast node and pod lifecycles, plus the chaos stage that fails a running container on request.
kwok_stages() {
  local dest="$KWOK_STAGES"
  [[ -f "$dest/.complete" ]] && return 0
  local dir
  dir=$(cd "$REPO_ROOT/tools/kwok" && go mod download -json sigs.k8s.io/kwok | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -d "$dir/kustomize/stage" ]] || die "kwok module has no stages at $dir/kustomize/stage"
  mkdir -p "$dest"
  local f
  for f in node/fast/node-initialize.yaml pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml \
    pod/fast/pod-delete.yaml pod/chaos/pod-container-running-failed.yaml; do
    cp "$dir/kustomize/stage/$f" "$dest/$(basename "$f")"
  done
  touch "$dest/.complete"
  log "kwok stages copied to $dest"
}

# agent-sandbox's CRDs (Sandbox; SandboxClaim, SandboxTemplate, SandboxWarmPool) come inside its
# pinned module too.
agent_sandbox_crds() {
  local dest="$AGENT_SANDBOX_CRDS"
  [[ -f "$dest/.complete" ]] && return 0
  local dir
  dir=$(cd "$REPO_ROOT/tools/agent-sandbox" && go mod download -json sigs.k8s.io/agent-sandbox | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -d "$dir/k8s/crds" ]] || die "agent-sandbox module has no CRDs at $dir/k8s/crds"
  # (The module cache's files are read-only: a fresh dir, and copies that are not.)
  rm -rf "$dest"
  mkdir -p "$dest"
  install -m 0644 "$dir"/k8s/crds/*.yaml "$dest/"
  touch "$dest/.complete"
  log "agent-sandbox CRDs copied to $dest"
}

start=$SECONDS
build etcd "$ETCD_VERSION" "$ETCD_BIN" "-s -w" go.etcd.io/etcd/server/v3=etcd
build kwok "$KWOK_VERSION" "$KWOK_BIN" "-s -w" sigs.k8s.io/kwok/cmd/kwok
kwok_stages
build helm "$HELM_VERSION" "$HELM_BIN" "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
  helm.sh/helm/v3/cmd/helm
build prometheus "$PROMETHEUS_VERSION" "$PROMETHEUS_BIN" \
  "-s -w -X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION#v}" \
  github.com/prometheus/prometheus/cmd/promtool
build kubernetes "$KUBERNETES_VERSION" "$KUBERNETES_BIN" "$(k8s_ldflags)" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
build agent-sandbox "$AGENT_SANDBOX_VERSION" "$AGENT_SANDBOX_BIN" \
  "-s -w -X sigs.k8s.io/agent-sandbox/internal/version.gitVersion=$AGENT_SANDBOX_VERSION" \
  sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller
agent_sandbox_crds
if [[ "${REAL_NODE:-1}" != 0 ]]; then
  build node "$KUBERNETES_VERSION" "$NODE_BIN" "$(k8s_ldflags)" \
    k8s.io/kubernetes/cmd/kubelet
  "$REPO_ROOT/hack/node-packages.sh"
  "$REPO_ROOT/hack/image.sh" node-images
fi
log "tools ready in $((SECONDS - start))s under $CACHE_DIR/tools"
