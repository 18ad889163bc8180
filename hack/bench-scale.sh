#!/usr/bin/env bash
# make bench-scale: the operator against a bare baseline controller, one after the other, each on a
# local control plane of its own started and warmed up the same way, in ROUNDS rounds, and one
# table comparing them (see docs/performance.md).
#
#   N       Agents created at once in the converge phase (default 1000)
#   M       crash-looping Agents in the storm (default 200)
#   STORM   how long the storm lasts, in seconds (default 60)
#   QUIET   the quiet stretch after converging, in seconds (default 60)
#   ROUNDS  how many times each controller is measured (default 2): every round measures each,
#           each round in the order opposite to the one before (operator, budget, bare, bare,
#           budget, operator, ...), and the table pools the rounds' samples (each round's storm
#           is also given apart)
#   BUDGET_STORM=0     leave out the storm measured again with the operator's restart budget at
#                      its defaults (20/s, burst 100: "budget", a storm-only run with a table of
#                      its own); the operator's run keeps RESTART_RATE and RESTART_BURST
#   BENCH_PROFILE      cargo profile of the binaries measured (default release)
#   BENCH_KUBECONFIG   run both on this cluster (a local control plane: its audit log is read
#                      from logs/ next to the kubeconfig) instead of starting one for each
#   CONCURRENCY        the operator's --concurrency (default: its own)
#   BENCH_CHECK=1      fail unless every figure is present and sane (the smoke run of make test)
#   STORM_BACKOFF      the storm's agents back off this long (such as 2s) before each restart
#                      (the baseline does not back off: the operator measured against itself)
#   OPERATOR_BIN       measure this build of the operator instead of this checkout's (a before
#                      and after on one control plane)
#   BARE_BIN           measure this build of the baseline instead of this checkout's
#   BARE_PODS=operator the baseline makes the operator's pods (its labels, annotations and
#                      AGENT_* environment) instead of the least pod: a diagnosis of what those
#                      pods alone cost, not the baseline the targets are measured against
#   BARE_RECORDS=1     the baseline also writes each Agent's status after every tenth restart,
#                      as the operator once did in a storm: what that record costs (a diagnosis
#                      too)
#   BENCH_ORDER=bare-first  measure the baseline first in the first round (by default the
#                      operator goes first; on one BENCH_KUBECONFIG cluster the second begins
#                      on what the first left in the API server, so the order is part of what
#                      such a run measures)
#   KWOK_POD_PARALLELISM  how many pod stages kwok plays at once (default: kwok's 4)
#   BENCH_KEEP_LOGS=1  keep each control plane's logs, the audit log included, in
#                      target/bench-scale/logs/{operator,budget,bare}-ROUND/ when it stops (a
#                      BENCH_KUBECONFIG cluster keeps its own)
#
# The status lag (a storm pod seen Failed → its attempt seen in its Agent's status.restartHistory;
# an Agent created → a phase seen in its status) is the operator's figure: the baseline writes no
# status (or, with BARE_RECORDS=1, a storm's every tenth restart), and its lag is not required.
# At a storm's end its pods stop failing (the benchmark takes kwok's chaos label off them), and
# its requests are counted until the controller has been idle for 15 s (at most 120 s): what it
# does after the storm because of it counts too.
#
# Besides the table, each storm's restarts and requests second by second go to
# target/bench-scale/{operator,budget,bare}-ROUND-storm-seconds.md (`bench-scale seconds`); with
# GODEBUG=gctrace=1 the control plane started here traces its garbage collection, and those
# tables say how long the API server's collector was marking in each second.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
export PATH="$TOOLS_PATH:$PATH"

N=${N:-1000}
M=${M:-200}
STORM=${STORM:-60}
QUIET=${QUIET:-60}
ROUNDS=${ROUNDS:-2}
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS is a whole number of rounds, at least 1, not '$ROUNDS'"
STORM=${STORM%s}
QUIET=${QUIET%s}
PROFILE=${BENCH_PROFILE:-release}
# The restart budget binds a storm (the operator's defaults: 20 restarts a second, a burst of
# 100): in the operator's run, unless asked for, it is set so high that it never binds, and the
# figures are the operator's own cost; the budget's run measures the storm at the defaults
# (given explicitly; src/process/config.rs's tests hold the defaults to these figures).
RESTART_RATE=${RESTART_RATE:-100000}
RESTART_BURST=${RESTART_BURST:-100000}
DEFAULT_RESTART_RATE=20
DEFAULT_RESTART_BURST=100
BUDGET_STORM=${BUDGET_STORM:-1}
[[ "$BUDGET_STORM" =~ ^[01]$ ]] || die "BUDGET_STORM is 1 (measure it) or 0, not '$BUDGET_STORM'"
command="N=$N M=$M STORM=$STORM QUIET=$QUIET ROUNDS=$ROUNDS RESTART_RATE=$RESTART_RATE RESTART_BURST=$RESTART_BURST make bench-scale"
[[ "$BUDGET_STORM" == 1 ]] || command="BUDGET_STORM=0 $command"
# The operator reads CONCURRENCY (its --concurrency) from the environment as well.
[[ -z "${CONCURRENCY:-}" ]] || command="CONCURRENCY=$CONCURRENCY $command"
[[ -z "${OPERATOR_BIN:-}" ]] || command="OPERATOR_BIN=$OPERATOR_BIN $command"
[[ -z "${BARE_BIN:-}" ]] || command="BARE_BIN=$BARE_BIN $command"
[[ -z "${STORM_BACKOFF:-}" ]] || command="STORM_BACKOFF=$STORM_BACKOFF $command"
[[ -z "${KWOK_POD_PARALLELISM:-}" ]] || command="KWOK_POD_PARALLELISM=$KWOK_POD_PARALLELISM $command"
BARE_PODS=${BARE_PODS:-least}
[[ "$BARE_PODS" == least ]] || command="BARE_PODS=$BARE_PODS $command"
bare_records=()
[[ "${BARE_RECORDS:-}" != 1 ]] || { bare_records=(--records); command="BARE_RECORDS=1 $command"; }
case "${BENCH_ORDER:-operator-first}" in
  operator-first) order=(operator budget bare) ;;
  bare-first) order=(bare budget operator); command="BENCH_ORDER=bare-first $command" ;;
  *) die "BENCH_ORDER is operator-first or bare-first, not ${BENCH_ORDER}" ;;
esac
if [[ "$BUDGET_STORM" == 0 ]]; then
  order=("${order[0]}" "${order[2]}")
fi

out="$REPO_ROOT/target/bench-scale"
mkdir -p "$out"
[[ "${BENCH_KEEP_LOGS:-}" != 1 ]] || rm -rf "$out/logs"
started=()
# stop_cluster NAME STATUS: stops the control plane started for NAME's run, keeping its logs when
# asked (or, after a failure, its components' logs but the audit log).
stop_cluster() {
  local name=$1 status=$2
  [[ -n "${cluster:-}" ]] || return 0
  ((status == 0)) || cp "$cluster"/logs/kube-*.log "$cluster"/logs/kwok.log "$out/" 2>/dev/null || true
  if [[ "${BENCH_KEEP_LOGS:-}" == 1 ]]; then
    mkdir -p "$out/logs"
    cp -r "$cluster/logs" "$out/logs/$name" && log "$name: the control plane's logs are in $out/logs/$name"
  fi
  hack/cluster.sh down --dir "$cluster"
  cluster=""
}
cleanup() {
  local status=$? pid
  # Only the controllers started here (children of this shell, so their pids are still theirs).
  for pid in "${started[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [[ -n "${cluster:-}" ]]; then
    stop_cluster "${measuring:-run}" "$status"
  elif [[ -n "${round:-}" && -n "${BENCH_KUBECONFIG:-}" ]]; then
    # On a cluster of someone else's, whatever an interrupted round left goes.
    kubectl delete namespace --ignore-not-found --wait=false "bench-warm-$run_id-operator-$round" \
      "bench-warm-$run_id-budget-$round" "bench-warm-$run_id-bare-$round" \
      "$op_ns-converge" "$op_ns-storm" "$budget_ns-storm" \
      "$bare_ns-converge" "$bare_ns-storm" >/dev/null 2>&1 || true
  fi
  return 0
}
trap cleanup EXIT

log "building the operator and the baseline ($PROFILE)"
cargo build --locked --profile "$PROFILE" --bin agent-supervisor \
  --example bare-controller --example bench-scale
bin="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/$([[ $PROFILE == dev ]] && echo debug || echo "$PROFILE")"

# 1000 pods a node: room for every pod of the larger phase, and some.
bigger=$((N > M ? N : M))
nodes=$(((bigger * 5 / 4 + 999) / 1000))
((nodes >= 2)) || nodes=2

# control_plane NAME: the cluster NAME is measured on, with the CRDs established and warmed up.
# Unless BENCH_KUBECONFIG names one for both, each controller gets a control plane of its own,
# started and warmed up the same way: a storm then begins on the same history in the API server
# for both (a watch cache keeps up to 75 s of each resource's events, and the heap they hold, so
# on one control plane the second storm would begin on what the first run left there).
control_plane() {
  local name=$1
  if [[ -n "${BENCH_KUBECONFIG:-}" ]]; then
    export KUBECONFIG="$BENCH_KUBECONFIG"
  else
    cluster="$REPO_ROOT/target/bench-cluster"
    log "$name: a control plane of its own ($nodes kwok nodes)"
    REAL_NODE=0 KWOK_NODES=$nodes AUDIT_LOG_MAXBACKUP=50 hack/cluster.sh up --dir "$cluster" --owner-pid $$
    export KUBECONFIG="$cluster/kubeconfig"
  fi
  audit_dir="$(dirname "$KUBECONFIG")/logs"
  [[ -f "$audit_dir/audit.log" ]] || die "no audit log at $audit_dir/audit.log"
  kubectl apply --server-side --force-conflicts -f crds/ >/dev/null
  # (Not `kubectl wait`: it fails, rather than waits, on a CRD that has no conditions yet.)
  local crd established
  for crd in agents.supervisor.dev restartpolicies.supervisor.dev; do
    for _ in $(seq 120); do
      # (A CRD with no conditions yet makes the filter an error: not established yet.)
      established=$(kubectl get crd "$crd" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null || true)
      [[ "$established" == True ]] && break
      sleep 0.5
    done
    [[ "$established" == True ]] || die "CRD $crd not established after 60s"
  done
  # A fresh control plane's first burst of creates is slower than every later one: paid here, by
  # no one measured, rather than by the controller measured.
  log "$name: warm-up: $N Agents and their pods, made directly"
  "$bin/examples/bench-scale" warm-up --namespace "bench-warm-$run_id-$name-$round" --agents "$N"
}

# measure NAME USER_AGENT READY_CHECK NAMESPACE_PREFIX FLAGS -- COMMAND...: starts the
# controller, waits until READY_CHECK succeeds, runs the phases against it (`bench-scale run`,
# with the words of FLAGS added), stops it; what it measured goes to $out/NAME-ROUND.json.
measure() {
  local name=$1 user_agent=$2 ready=$3 prefix=$4 flags=() tag="$1-$round"
  read -r -a flags <<<"$5"
  shift 6
  log "$name: starting (round $round of $ROUNDS)"
  "$@" >"$out/$tag.log" 2>&1 &
  local pid=$!
  started+=("$pid")
  local deadline=$((SECONDS + 300))
  until eval "$ready" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$out/$tag.log" >&2; die "$name exited"; }
    ((SECONDS < deadline)) || { tail -n 20 "$out/$tag.log" >&2; die "$name was not ready within 300s"; }
    sleep 0.2
  done
  # What the storm costs the control plane, when it is a local one (its pid files beside the
  # kubeconfig, as hack/cluster.sh leaves them).
  local plane=() dir
  dir=$(dirname "$KUBECONFIG")
  [[ ! -f "$dir/kube-apiserver.pid" ]] || plane+=(--apiserver-pid "$(cat "$dir/kube-apiserver.pid")")
  [[ ! -f "$dir/etcd.pid" ]] || plane+=(--etcd-pid "$(cat "$dir/etcd.pid")")
  [[ ! -f "$dir/kwok.pid" ]] || plane+=(--kwok-pid "$(cat "$dir/kwok.pid")")
  [[ ! -f "$dir/kube-scheduler.pid" ]] || plane+=(--scheduler-pid "$(cat "$dir/kube-scheduler.pid")")
  [[ ! -f "$dir/kube-controller-manager.pid" ]] ||
    plane+=(--controller-manager-pid "$(cat "$dir/kube-controller-manager.pid")")
  if [[ " ${flags[*]} " == *" --storm-only "* ]]; then
    log "$name: storm ($M agents, ${STORM}s)"
  else
    log "$name: converge ($N agents), quiet ${QUIET}s, storm ($M agents, ${STORM}s)"
  fi
  "$bin/examples/bench-scale" run --controller "$name" --pid "$pid" --user-agent "$user_agent" "${plane[@]}" \
    --audit-dir "$audit_dir" --namespace-prefix "$prefix" --agents "$N" --storm-agents "$M" \
    --storm "$STORM" --quiet "$QUIET" ${STORM_BACKOFF:+--storm-backoff "$STORM_BACKOFF"} \
    "${flags[@]}" --out "$out/$tag.json"
  kill "$pid"
  wait "$pid" || true
  # The storm second by second (`bench-scale seconds`), while the audit log is still there.
  "$bin/examples/bench-scale" seconds --audit-dir "$audit_dir" --namespace "$prefix-storm" \
    >"$out/$tag-storm-seconds.md"
}

run_id=$(printf '%04x' $((RANDOM % 65536)))
port=$(free_port)
measure_operator() {
  # The operator records every change in its Agents' status: its status lag is required.
  measure operator "agent-supervisor/" "curl -sf http://127.0.0.1:$port/readyz" "$op_ns" \
    --status-records -- \
    "${OPERATOR_BIN:-$bin/agent-supervisor}" --leader-elect=false --namespaces="$op_ns-converge,$op_ns-storm" --status-addr= \
    --metrics-addr="127.0.0.1:$port" --restart-rate="$RESTART_RATE" --restart-burst="$RESTART_BURST"
}
measure_budget() {
  # The same operator, its restart budget at the defaults: the storm alone (the converge makes
  # first pods, which the budget does not hold).
  measure budget "agent-supervisor/" "curl -sf http://127.0.0.1:$port/readyz" "$budget_ns" \
    "--status-records --storm-only --restart-budget=$DEFAULT_RESTART_RATE/$DEFAULT_RESTART_BURST" -- \
    "${OPERATOR_BIN:-$bin/agent-supervisor}" --leader-elect=false --namespaces="$budget_ns-storm" --status-addr= \
    --metrics-addr="127.0.0.1:$port" --restart-rate="$DEFAULT_RESTART_RATE" --restart-burst="$DEFAULT_RESTART_BURST"
}
measure_bare() {
  measure bare "bare-controller/" "[[ \$(grep -c '^ready' '$out/bare-$round.log') -ge 2 ]]" "$bare_ns" "" -- \
    "${BARE_BIN:-$bin/examples/bare-controller}" --namespaces="$bare_ns-converge,$bare_ns-storm" \
    --pods="$BARE_PODS" "${bare_records[@]}"
}
rm -f "$out"/operator-*.json "$out"/budget-*.json "$out"/bare-*.json "$out"/*-storm-seconds.md
figures=()
for ((round = 1; round <= ROUNDS; round++)); do
  op_ns="bench-op-$run_id-$round"
  budget_ns="bench-budget-$run_id-$round"
  bare_ns="bench-bare-$run_id-$round"
  # Each round in the order opposite to the one before: what a position in the order does to a
  # measurement falls on every controller alike.
  names=("${order[@]}")
  if ((round % 2 == 0)); then
    names=()
    for ((i = ${#order[@]} - 1; i >= 0; i--)); do names+=("${order[i]}"); done
  fi
  for name in "${names[@]}"; do
    measuring="$name-$round"
    control_plane "$name"
    "measure_$name"
    stop_cluster "$name-$round" 0
  done
  figures+=(--operator "$out/operator-$round.json" --bare "$out/bare-$round.json")
  [[ "$BUDGET_STORM" == 0 ]] || figures+=(--storm-only "$out/budget-$round.json")
done
measuring=""

echo
check=()
[[ "${BENCH_CHECK:-}" == 1 ]] && check=(--check)
"$bin/examples/bench-scale" table "${figures[@]}" "${check[@]}"
echo
planes="a control plane of its own each time, $nodes kwok nodes"
[[ -z "${BENCH_KUBECONFIG:-}" ]] || planes="all on the given cluster"
echo "Measured with: $command ($planes; $(nproc) cores)"
echo "Each storm second by second: $out/{operator,budget,bare}-ROUND-storm-seconds.md (rounds 1 to $ROUNDS)"
