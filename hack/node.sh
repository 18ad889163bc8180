#!/usr/bin/env bash
# The local control plane's real node: a kubelet named `real-node` on containerd + runc, with
# pods on a bridge of its own. hack/cluster.sh runs it (unless REAL_NODE=0); by hand:
#
#   hack/node.sh up   --dir DIR --api-port PORT   DIR is the cluster's (its pki/ and kubeconfig)
#   hack/node.sh down --dir DIR                   stop it, then remove every mount, cgroup, rule
#                                                 and interface it made
#   hack/node.sh left --dir DIR                   print what of it is left (nothing, once down)
#
# Everything lives under DIR/node. Several clusters may each run one: the bridge, the pod subnet,
# the cgroup root and the iptables rule are named after a hash of DIR. Pods reach the API server
# as in-cluster clients do, at the `kubernetes` Service's address (10.96.0.1:443): one DNAT rule
# on this node's bridge sends that address to the API server on loopback. Pods get a route to
# the Service range only, so nothing they send can leave this machine.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cmd=${1:-}
shift || true
DIR="" API_PORT=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --dir) DIR=$2; shift 2 ;;
    --api-port) API_PORT=$2; shift 2 ;;
    *) die "unknown argument: $1" ;;
  esac
done
[[ -n "$DIR" ]] || die "usage: hack/node.sh up|down|left --dir DIR [--api-port PORT]"
DIR="$(cd "$DIR" && pwd)"
NODE="$DIR/node"
PKI="$DIR/pki"
ID=$(printf '%s' "$DIR" | sha256sum | cut -c1-8)
BRIDGE="asn$ID"
CGROUP_ROOT="agent-supervisor-$ID"
RULE_COMMENT="agent-supervisor-$ID"
SOCK="$NODE/containerd/containerd.sock"
SERVICE_IP=10.96.0.1
NODE_NAME=real-node
export PATH="$NODE_BIN:$KUBERNETES_BIN:$PATH"

ctr_() { ctr --address "$SOCK" --namespace k8s.io "$@"; }

# The pod subnet: 10.244.N.0/24, N from the hash, the first not routed on this machine already.
pick_subnet() {
  local n=$((16#${ID:0:4} % 250 + 1)) i
  for ((i = 0; i < 250; i++)); do
    if ! ip -4 route show | grep -q "^10\.244\.$n\.0/24 "; then
      echo "$n"
      return 0
    fi
    n=$((n % 250 + 1))
  done
  die "no free 10.244.N.0/24 subnet for the real node"
}

# The cgroup v1 hierarchies (and the unified one) this machine mounts, one dir per line.
cgroup_mounts() { awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/self/mounts; }

node_cert() {
  [[ -f "$PKI/node.crt" ]] && return 0
  (
    cd "$PKI"
    openssl req -newkey rsa:2048 -nodes -keyout node.key -out node.csr \
      -subj "/O=system:nodes/CN=system:node:$NODE_NAME" 2>/dev/null
    openssl x509 -req -in node.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -out node.crt -days 3650 -extfile client.ext 2>/dev/null
  )
}

write_configs() {
  local n=$1 gw=$2 kubelet_port healthz_port
  kubelet_port=$(free_port)
  healthz_port=$(free_port)
  mkdir -p "$NODE"/{containerd,cni,cni-ipam,kubelet,pod-logs,logs}
  cat >"$NODE/containerd.toml" <<EOF
version = 2
root = "$NODE/containerd/root"
state = "$NODE/containerd/state"
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$NODE/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:dev"
  # This machine lacks CAP_SYS_RESOURCE: the pause container's oom_score_adj of -998 would fail.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE/cni"
EOF
  # isGateway and ipMasq off: the bridge's address is set here, and the plugin then changes no
  # host-wide setting (it would turn on IP forwarding); the one route reaches the Services.
  cat >"$NODE/cni/10-real-node.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "real-node-$ID", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": false, "ipMasq": false,
   "ipam": {"type": "host-local", "dataDir": "$NODE/cni-ipam",
            "ranges": [[{"subnet": "10.244.$n.0/24", "gateway": "$gw"}]],
            "routes": [{"dst": "10.96.0.0/16", "gw": "$gw"}]}}]}
EOF
  cat >"$NODE/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$PKI/ca.crt"}
users:
- name: node
  user: {client-certificate: "$PKI/node.crt", client-key: "$PKI/node.key"}
contexts:
- name: local
  context: {cluster: local, user: node}
current-context: local
EOF
  # Only holders of this cluster's client certificates may use the kubelet's API (the API server
  # does, for logs and exec); the disk is shared, so eviction and image GC stay out of the way.
  cat >"$NODE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: "$gw"
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: "$PKI/ca.crt"}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: "unix://$SOCK"
cgroupDriver: cgroupfs
cgroupRoot: "/$CGROUP_ROOT"
failCgroupV1: false
failSwapOn: false
enforceNodeAllocatable: []
localStorageCapacityIsolation: false
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
podLogsDir: "$NODE/pod-logs"
volumePluginDir: "$NODE/volume-plugins"
resolvConf: ""
registerWithTaints:
- {key: supervisor.dev/node, value: real, effect: NoSchedule}
EOF
  echo "$healthz_port" >"$NODE/healthz-port"
}

running() { [[ -f "$NODE/$1.pid" ]] && is_ours "$(cat "$NODE/$1.pid")" "$1"; }

start() {
  local name=$1
  shift
  "$@" >"$NODE/logs/$name.log" 2>&1 &
  echo $! >"$NODE/$name.pid"
}

wait_until() {
  local name=$1 deadline=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ! running "$name" || ((SECONDS >= deadline)); then
      printf 'error: the real node'"'"'s %s did not start; last lines of %s:\n' "$name" "$NODE/logs/$name.log" >&2
      tail -n 25 "$NODE/logs/$name.log" >&2 || true
      down
      exit 1
    fi
    sleep 0.5
  done
}

node_ready() {
  [[ "$(kubectl --kubeconfig="$DIR/kubeconfig" get node "$NODE_NAME" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]
}

up() {
  [[ -n "$API_PORT" ]] || die "hack/node.sh up needs --api-port"
  for bin in containerd ctr runc kubelet iptables; do
    command -v "$bin" >/dev/null || die "$bin not found: run 'make tools' (or set REAL_NODE=0)"
  done
  [[ -x /usr/lib/cni/bridge ]] || die "the CNI plugins are missing: run 'make tools' (or set REAL_NODE=0)"
  [[ -f "$IMAGES_DIR/pause.tar" ]] || die "no pause image in $IMAGES_DIR: run 'make tools'"
  local n gw c
  n=$(pick_subnet)
  gw="10.244.$n.1"
  node_cert
  write_configs "$n" "$gw"

  # The bridge and its address first: the kubelet's node IP must be on an interface.
  ip link add name "$BRIDGE" type bridge
  ip addr add "$gw/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # Pods' packets to the Service reach the API server on loopback.
  sysctl -qw "net.ipv4.conf.$BRIDGE.route_localnet=1"
  iptables -t nat -A PREROUTING -i "$BRIDGE" -d "$SERVICE_IP/32" -p tcp --dport 443 \
    -m comment --comment "$RULE_COMMENT" -j DNAT --to-destination "127.0.0.1:$API_PORT"
  # The kubelet's cgroup root, in every hierarchy; cpuset needs its CPUs and memory nodes set.
  for c in $(cgroup_mounts); do mkdir -p "$c/$CGROUP_ROOT"; done
  if [[ -f /sys/fs/cgroup/cpuset/cpuset.cpus ]]; then
    cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/$CGROUP_ROOT/cpuset.cpus"
    cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/$CGROUP_ROOT/cpuset.mems"
  fi

  start containerd containerd --config "$NODE/containerd.toml" --log-level warn
  wait_until containerd 30 ctr_ version
  local image
  for image in "$IMAGES_DIR"/*.tar; do
    ctr_ images import --no-unpack "$image" >/dev/null || die "importing $image into the real node failed"
  done
  start kubelet kubelet --config "$NODE/kubelet.yaml" --kubeconfig "$NODE/kubeconfig" \
    --root-dir "$NODE/kubelet" --cert-dir "$NODE/kubelet/pki" --hostname-override "$NODE_NAME" \
    --node-ip "$gw" --node-labels supervisor.dev/node=real --v=1
  wait_until kubelet 90 node_ready
  # Admission taints a new node not-ready; the node lifecycle controller, which would lift it, is
  # not run (the kwok nodes send no heartbeats), so it is lifted here once the node is Ready.
  kubectl --kubeconfig="$DIR/kubeconfig" taint nodes "$NODE_NAME" node.kubernetes.io/not-ready:NoSchedule- >/dev/null
  log "real node $NODE_NAME Ready (pods on $BRIDGE, 10.244.$n.0/24)"
}

# Every mount under DIR/node, deepest first.
our_mounts() { awk -v p="$NODE/" 'index($2, p) == 1 { print $2 }' /proc/self/mounts | sort -r; }

our_rules() {
  iptables -t nat -S PREROUTING 2>/dev/null | grep -- "--comment $RULE_COMMENT" | sed 's/^-A /-D /' || true
}

down() {
  local pid m c rule task
  if running kubelet; then stop_ours "$(cat "$NODE/kubelet.pid")" kubelet; fi
  rm -f "$NODE/kubelet.pid"
  if running containerd; then
    # Every container, then its shim: none may outlive containerd.
    for task in $(ctr_ tasks list -q 2>/dev/null); do
      ctr_ tasks kill -s SIGKILL "$task" >/dev/null 2>&1 || true
    done
    for task in $(ctr_ tasks list -q 2>/dev/null); do
      ctr_ tasks delete -f "$task" >/dev/null 2>&1 || true
    done
    stop_ours "$(cat "$NODE/containerd.pid")" containerd
  fi
  rm -f "$NODE/containerd.pid"
  # Shims left by a containerd that died first: each names our socket in its command line.
  for pid in $(pgrep -f -- "-address $SOCK" || true); do
    is_ours "$pid" containerd-shim-runc-v2 && kill -9 "$pid" 2>/dev/null || true
  done
  for m in $(our_mounts); do umount -R "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  for c in $(cgroup_mounts); do
    [[ -d "$c/$CGROUP_ROOT" ]] && find "$c/$CGROUP_ROOT" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  while read -r rule; do
    [[ -n "$rule" ]] && eval "iptables -t nat $rule" || true
  done < <(our_rules)
  ip link show "$BRIDGE" >/dev/null 2>&1 && ip link delete "$BRIDGE" || true
  # The kubelet's log links for this node's containers.
  find /var/log/containers -maxdepth 1 -type l -lname "$NODE/*" -delete 2>/dev/null || true
  rm -rf "$NODE"
}

# What of this node is left: processes, mounts, cgroups, rules, the bridge, network namespaces.
left() {
  local c
  running kubelet && echo "process: kubelet $(cat "$NODE/kubelet.pid")"
  running containerd && echo "process: containerd $(cat "$NODE/containerd.pid")"
  { pgrep -f -- "-address $SOCK" || true; } | sed 's/^/process: shim /'
  our_mounts | sed 's/^/mount: /'
  for c in $(cgroup_mounts); do [[ -d "$c/$CGROUP_ROOT" ]] && echo "cgroup: $c/$CGROUP_ROOT"; done
  our_rules | sed 's/^/iptables: /'
  ip link show "$BRIDGE" >/dev/null 2>&1 && echo "interface: $BRIDGE"
  { ip -o link show master "$BRIDGE" 2>/dev/null || true; } | sed 's/^/interface: /'
  return 0
}

case $cmd in
  up) up ;;
  down) down ;;
  left) left ;;
  *) die "usage: hack/node.sh up|down|left --dir DIR [--api-port PORT]" ;;
esac
