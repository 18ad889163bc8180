#!/usr/bin/env bash
# A real local Kubernetes control plane: etcd, kube-apiserver (RBAC on), kube-controller-manager,
# kube-scheduler and kwok with fake nodes, all on free loopback ports.
#
#   hack/cluster.sh up   [--dir DIR] [--owner-pid PID]   start (a no-op if DIR's cluster is up)
#   hack/cluster.sh down [--dir DIR]                     stop exactly what `up` started, remove data
#   hack/cluster.sh env  [--dir DIR]                     print shell exports for kubectl and tests
#
# DIR defaults to target/cluster. With --owner-pid, the cluster stops itself when that process
# exits (how a test run that started its own cluster cleans up, even when it is killed).
# KWOK_NODES fake nodes (default 2) take up to 1000 pods each; AUDIT_LOG_MAXBACKUP rotated audit
# logs of 200 MB are kept (default 1); APISERVER_PROFILING=true serves the API server's
# /debug/pprof (for `go tool pprof` during a benchmark); KWOK_POD_PARALLELISM sets how many pod
# stages kwok plays at once (its podPlayStageParallelism, default 4). Beside the kwok nodes runs
# one real node, `real-node` (hack/node.sh: a kubelet on containerd), tainted
# supervisor.dev/node=real:NoSchedule; REAL_NODE=0 leaves it out. AGENT_SANDBOX=1 (default 0) also
# installs kubernetes-sigs/agent-sandbox's CRDs (Sandbox, SandboxClaim, SandboxTemplate,
# SandboxWarmPool) and runs its controller (built by hack/tools.sh) with its extensions on.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cmd=${1:-}
shift || true
DIR="$REPO_ROOT/target/cluster"
OWNER_PID=""
NODES="${KWOK_NODES:-2}"
REAL_NODE="${REAL_NODE:-1}"
AGENT_SANDBOX="${AGENT_SANDBOX:-0}"
[[ "${KWOK_POD_PARALLELISM:-1}" =~ ^[1-9][0-9]*$ ]] ||
  die "KWOK_POD_PARALLELISM is a positive whole number, not '$KWOK_POD_PARALLELISM'"
while [[ $# -gt 0 ]]; do
  case $1 in
    --dir) DIR=$2; shift 2 ;;
    --owner-pid) OWNER_PID=$2; shift 2 ;;
    *) die "unknown argument: $1" ;;
  esac
done
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
KUBECONFIG_FILE="$DIR/kubeconfig"
PKI="$DIR/pki"
ORIG_PATH=$PATH
export PATH="$TOOLS_PATH:$PATH"

# The pid files of the processes this cluster started, in start order.
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
[[ "$AGENT_SANDBOX" == 0 ]] || COMPONENTS+=(agent-sandbox)

# The program behind each pid file.
program() {
  case $1 in
    operator) echo agent-supervisor ;;
    port-forward) echo kubectl ;;
    agent-sandbox) echo agent-sandbox-controller ;;
    *) echo "$1" ;;
  esac
}

running() { [[ -f "$DIR/$1.pid" ]] && is_ours "$(cat "$DIR/$1.pid")" "$(program "$1")"; }

all_running() {
  local c
  for c in "${COMPONENTS[@]}"; do running "$c" || return 1; done
  [[ "$REAL_NODE" == 0 || -f "$DIR/node/kubelet.pid" ]] && [[ -f "$KUBECONFIG_FILE" ]]
}

# start NAME COMMAND...: run in the background with its own log and pid file; returns once the
# child runs the program (right after the fork it still runs bash, which `running` would take
# for an exit), once it has exited, or after a second.
start() {
  local name=$1 pid
  shift
  "$@" >"$DIR/logs/$name.log" 2>&1 &
  pid=$!
  echo "$pid" >"$DIR/$name.pid"
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null && ! is_ours "$pid" "$(program "$name")" || break
    sleep 0.01
  done
}

fail_with_log() {
  local name=$1 why=$2
  printf 'error: %s %s; last lines of %s:\n' "$name" "$why" "$DIR/logs/$name.log" >&2
  tail -n 25 "$DIR/logs/$name.log" >&2 || true
  stop_all
  exit 1
}

# wait_for NAME SECONDS COMMAND...: until COMMAND succeeds, while NAME's process lives.
wait_for() {
  local name=$1 deadline=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    running "$name" || fail_with_log "$name" "exited during startup"
    ((SECONDS < deadline)) || fail_with_log "$name" "was not ready within $2s"
    sleep 0.5
  done
}

gen_pki() {
  [[ -f "$PKI/admin.crt" ]] && return 0
  mkdir -p "$PKI"
  (
    cd "$PKI"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
      -subj "/CN=agent-supervisor-test-ca" 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    # Serving certificate for 127.0.0.1 and the in-cluster names.
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr \
      -subj "/CN=kube-apiserver" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' >apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -out apiserver.crt -days 3650 -extfile apiserver.ext 2>/dev/null
    # Cluster-admin client certificate (group system:masters).
    openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr \
      -subj "/O=system:masters/CN=admin" 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -out admin.crt -days 3650 -extfile client.ext 2>/dev/null
  )
}

write_kubeconfig() {
  local port=$1
  cat >"$KUBECONFIG_FILE" <<KC
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority: $PKI/ca.crt
users:
- name: admin
  user:
    client-certificate: $PKI/admin.crt
    client-key: $PKI/admin.key
contexts:
- name: local
  context: {cluster: local, user: admin}
current-context: local
KC
}

fake_node() {
  cat <<NODE
apiVersion: v1
kind: Node
metadata:
  name: $1
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    kubernetes.io/hostname: $1
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "1000"}
  capacity: {cpu: "32", memory: 256Gi, pods: "1000"}
NODE
}

up() {
  if all_running; then
    log "cluster in $DIR is already up"
    return 0
  fi
  stop_all
  for bin in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok; do
    command -v "$bin" >/dev/null || die "$bin not found; run 'make tools' first"
  done
  [[ "$AGENT_SANDBOX" == 0 ]] || [[ -x "$AGENT_SANDBOX_BIN/agent-sandbox-controller" &&
    -f "$AGENT_SANDBOX_CRDS/.complete" ]] || die "agent-sandbox is not built; run 'make tools' first"
  local t0=$SECONDS
  mkdir -p "$DIR/logs"
  if [[ -n "$OWNER_PID" ]]; then
    # A detached watcher, set before anything starts: when the owner exits, however and
    # whenever it exits, the cluster goes with it.
    nohup bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; "$2" down --dir "$3"' \
      _ "$OWNER_PID" "$REPO_ROOT/hack/cluster.sh" "$DIR" >/dev/null 2>&1 &
    echo $! >"$DIR/watcher.pid"
  fi
  # Whatever fails from here on, nothing is left running.
  trap 'stop_all' ERR
  gen_pki

  local etcd_port peer_port api_port
  etcd_port=$(free_port)
  peer_port=$(free_port)
  api_port=$(free_port)

  log "starting etcd on 127.0.0.1:$etcd_port"
  start etcd etcd --name=local --data-dir="$DIR/etcd" --unsafe-no-fsync \
    --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
    --listen-peer-urls="http://127.0.0.1:$peer_port" --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-cluster="local=http://127.0.0.1:$peer_port" --listen-metrics-urls="" \
    --quota-backend-bytes=4294967296 --log-level=warn
  wait_for etcd 60 curl -sf "http://127.0.0.1:$etcd_port/health"

  # Every request is audited at Metadata level: tests count who wrote what (user, user agent, verb).
  cat >"$DIR/audit-policy.yaml" <<'AUDIT'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
AUDIT

  log "starting kube-apiserver on 127.0.0.1:$api_port (RBAC on)"
  start kube-apiserver kube-apiserver --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
    --cert-dir="$DIR/apiserver" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" --authorization-mode=Node,RBAC \
    --kubelet-client-certificate="$PKI/admin.crt" --kubelet-client-key="$PKI/admin.key" \
    --kubelet-preferred-address-types=InternalIP \
    --service-cluster-ip-range=10.96.0.0/16 --endpoint-reconciler-type=none \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --audit-policy-file="$DIR/audit-policy.yaml" --audit-log-path="$DIR/logs/audit.log" \
    --audit-log-maxsize=200 --audit-log-maxbackup="${AUDIT_LOG_MAXBACKUP:-1}" \
    --profiling="${APISERVER_PROFILING:-false}" --v=1
  write_kubeconfig "$api_port"
  wait_for kube-apiserver 120 kubectl --kubeconfig="$KUBECONFIG_FILE" get --raw=/readyz

  log "starting kube-controller-manager and kube-scheduler"
  start kube-controller-manager kube-controller-manager --kubeconfig="$KUBECONFIG_FILE" \
    --authentication-kubeconfig="$KUBECONFIG_FILE" --authorization-kubeconfig="$KUBECONFIG_FILE" \
    --secure-port=0 --leader-elect=false --use-service-account-credentials=false \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --controllers='*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle,-service-lb-controller,-route' \
    --concurrent-gc-syncs=5 --v=1
  start kube-scheduler kube-scheduler --kubeconfig="$KUBECONFIG_FILE" \
    --authentication-kubeconfig="$KUBECONFIG_FILE" --authorization-kubeconfig="$KUBECONFIG_FILE" \
    --secure-port=0 --leader-elect=false --v=1

  log "starting kwok with $NODES fake nodes"
  [[ -f "$KWOK_STAGES/.complete" ]] || die "kwok stages missing in $KWOK_STAGES; run 'make tools'"
  local stage
  {
    for stage in "$KWOK_STAGES"/*.yaml; do
      cat "$stage"
      echo "---"
    done
    # A KwokConfiguration leaves every parallelism it does not name at 0, which kwok refuses:
    # the node ones are given kwok's own default, 4.
    [[ -z "${KWOK_POD_PARALLELISM:-}" ]] || printf '%s\n' \
      "apiVersion: config.kwok.x-k8s.io/v1alpha1" "kind: KwokConfiguration" "options:" \
      "  podPlayStageParallelism: $KWOK_POD_PARALLELISM" "  nodePlayStageParallelism: 4" \
      "  nodeLeaseParallelism: 4"
  } >"$DIR/kwok.yaml"
  start kwok kwok --kubeconfig="$KUBECONFIG_FILE" --config="$DIR/kwok.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --cidr=10.0.0.1/16 --node-ip=10.0.0.1 --server-address=""
  local i
  for ((i = 0; i < NODES; i++)); do
    fake_node "kwok-node-$i" | kubectl --kubeconfig="$KUBECONFIG_FILE" apply -f - >/dev/null
    # Admission taints new nodes not-ready; the node lifecycle controller (not run here: kwok
    # nodes send no heartbeats) would lift it once kwok reports the node Ready.
    kubectl --kubeconfig="$KUBECONFIG_FILE" taint nodes "kwok-node-$i" node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
  done
  wait_for kwok 60 nodes_ready
  running kube-controller-manager || fail_with_log kube-controller-manager "exited during startup"
  running kube-scheduler || fail_with_log kube-scheduler "exited during startup"
  # The ServiceAccount controller has run once the default namespace has its account.
  wait_for kube-controller-manager 60 kubectl --kubeconfig="$KUBECONFIG_FILE" -n default get serviceaccount default
  if [[ "$REAL_NODE" != 0 ]]; then
    log "starting the real node"
    "$REPO_ROOT/hack/node.sh" up --dir "$DIR" --api-port "$api_port"
  fi
  [[ "$AGENT_SANDBOX" == 0 ]] || start_agent_sandbox

  trap - ERR
  log "cluster up in $((SECONDS - t0))s; KUBECONFIG=$KUBECONFIG_FILE"
}

# agent-sandbox's CRDs, then its controller: no leader election (it is the only one), metrics off,
# its health probe on a free loopback port, so that clusters side by side do not collide.
start_agent_sandbox() {
  local k=(kubectl --kubeconfig="$KUBECONFIG_FILE") health_port
  log "installing agent-sandbox $AGENT_SANDBOX_VERSION's CRDs"
  "${k[@]}" apply --server-side --force-conflicts -f "$AGENT_SANDBOX_CRDS" >/dev/null
  "${k[@]}" wait --for=condition=Established --timeout=60s -f "$AGENT_SANDBOX_CRDS" >/dev/null
  health_port=$(free_port)
  log "starting agent-sandbox-controller (health on 127.0.0.1:$health_port)"
  start agent-sandbox "$AGENT_SANDBOX_BIN/agent-sandbox-controller" --kubeconfig="$KUBECONFIG_FILE" \
    --extensions --leader-elect=false --metrics-bind-address=0 \
    --health-probe-bind-address="127.0.0.1:$health_port"
  wait_for agent-sandbox 60 curl -sf "http://127.0.0.1:$health_port/readyz"
  # Ready answers before the informers sync; the Sandbox controller's workers start after.
  wait_for agent-sandbox 60 grep -q '"Starting workers".*"controller":"sandbox"' "$DIR/logs/agent-sandbox.log"
}

nodes_ready() {
  local ready
  ready=$(kubectl --kubeconfig="$KUBECONFIG_FILE" get nodes \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)
  ((ready >= NODES))
}

stop_all() {
  local c pid i
  # Reverse start order: clients first, etcd last. An operator started against this cluster
  # (by the demo), or the demo's port-forward to the operator's pod, leaves its pid file here too;
  # agent-sandbox's controller is stopped whatever AGENT_SANDBOX says now.
  [[ -d "$DIR/node" ]] && "$REPO_ROOT/hack/node.sh" down --dir "$DIR"
  local order=(port-forward operator agent-sandbox)
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do order+=("${COMPONENTS[$i]}"); done
  for c in "${order[@]}"; do
    [[ -f "$DIR/$c.pid" ]] || continue
    stop_ours "$(cat "$DIR/$c.pid")" "$(program "$c")"
    rm -f "$DIR/$c.pid"
  done
}

down() {
  stop_all
  if [[ -f "$DIR/watcher.pid" ]]; then
    local w
    w=$(cat "$DIR/watcher.pid")
    rm -f "$DIR/watcher.pid"
    # Only when called from outside the watcher itself.
    [[ "$w" != "$PPID" && "$w" != "$$" ]] && is_ours "$w" bash && kill "$w" 2>/dev/null || true
  fi
  rm -rf "$DIR/etcd" "$DIR/apiserver" "$DIR/logs" "$DIR/pki" "$KUBECONFIG_FILE" "$DIR/audit-policy.yaml" "$DIR/kwok.yaml"
  log "cluster in $DIR stopped"
}

case $cmd in
  up) up ;;
  down) down ;;
  env)
    printf 'export KUBECONFIG=%q\n' "$KUBECONFIG_FILE"
    printf 'export PATH=%q\n' "$TOOLS_PATH:$ORIG_PATH"
    ;;
  *) die "usage: hack/cluster.sh up|down|env [--dir DIR] [--owner-pid PID]" ;;
esac
