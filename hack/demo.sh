#!/usr/bin/env bash
# The demonstration: a local control plane with fake nodes and a real one, the operator
# installed by its chart from its own image on the real node, and the examples — agents that
# crash, back off, trip the breaker, shut down, run out of budget and recover, a LangGraph agent
# (examples/langgraph-agent) in a real container that crashes and resumes at its node, and an
# agent-sandbox Sandbox whose crashing pod is backed off and trips the breaker.
# With REAL_NODE=0 (no real node) the operator runs from source as a process and the LangGraph
# agent's program runs beside its pods (hack/podrun.py).
#
#   hack/demo.sh          show it, then tear everything down
#   KEEP=1 hack/demo.sh   leave the cluster and the operator running
#   DEMO_SECONDS=120 ...  watch for longer (default 75: the agent team's crew gives up and the
#                         team restarts it; the team itself gives up about 3 minutes in)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
export PATH="$TOOLS_PATH:$PATH"
dir="$REPO_ROOT/target/cluster"
export KUBECONFIG="$dir/kubeconfig"
ns=demo
watch_for=${DEMO_SECONDS:-75}

if [[ "${KEEP:-}" != 1 ]]; then
  trap 'hack/cluster.sh down --dir "$dir"' EXIT
fi
# With agent-sandbox's CRDs and controller: the operator supervises a Sandbox too.
AGENT_SANDBOX=1 hack/cluster.sh up --dir "$dir"

log "building the operator"
cargo build --quiet --locked --bin agent-supervisor --bin kubectl-agent
# The LangGraph agent's Python: the SDK's pinned virtualenv (made once, in the cache), with the
# SDK from this checkout.
py="$(sdk_venv)"
export PYTHONPATH="$REPO_ROOT/sdk/python/src"
log "installing the CRDs"
kubectl apply --server-side --field-manager=agent-supervisor-demo -f crds/ >/dev/null
for crd in agents.supervisor.dev restartpolicies.supervisor.dev agentgroups.supervisor.dev; do
  # (kubectl wait fails outright while a new CRD has no conditions yet: poll instead.)
  until [[ "$(kubectl get crd "$crd" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" == True ]]; do
    sleep 0.2
  done
done
kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null

if [[ -f "$dir/operator.pid" ]]; then
  stop_ours "$(cat "$dir/operator.pid")" agent-supervisor # the operator of an earlier KEEP=1 demo
  rm -f "$dir/operator.pid"
fi
real_node=0
kubectl get node real-node >/dev/null 2>&1 && real_node=1
port=$(free_port)
status_port=$(free_port)
if ((real_node)); then
  # As a user would: the image, then the chart, on the real node; /metrics and the status page
  # reached through kubectl port-forward.
  PROFILE=dev hack/image.sh operator
  helm uninstall agent-supervisor -n agent-supervisor >/dev/null 2>&1 || true
  kubectl create namespace agent-supervisor --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl label namespace agent-supervisor --overwrite pod-security.kubernetes.io/enforce=restricted >/dev/null
  echo
  echo "\$ helm install agent-supervisor charts/agent-supervisor -n agent-supervisor --set image.repository=localhost/agent-supervisor,image.tag=dev ..."
  helm install agent-supervisor charts/agent-supervisor -n agent-supervisor --skip-crds --wait --timeout 120s \
    --set image.repository=localhost/agent-supervisor --set image.tag=dev --set image.pullPolicy=Never \
    --set-string 'nodeSelector.supervisor\.dev/node=real' --set 'tolerations[0].key=supervisor.dev/node' \
    --set 'tolerations[0].operator=Exists' --set "watchNamespaces={$ns}" --set sandboxes.enabled=true >/dev/null
  kubectl get deployment,pods -n agent-supervisor -o wide
  kubectl port-forward -n agent-supervisor deployment/agent-supervisor "$port:8080" "$status_port:8081" \
    >"$dir/logs/port-forward.log" 2>&1 &
  echo "$!" >"$dir/port-forward.pid"
else
  log "starting the operator (watching namespace $ns; log: $dir/logs/operator.log)"
  target/debug/agent-supervisor --namespaces="$ns" --leader-elect=false --metrics-addr="127.0.0.1:$port" \
    --status-addr="127.0.0.1:$status_port" \
    >"$dir/logs/operator.log" 2>&1 &
  operator=$!
  echo "$operator" >"$dir/operator.pid"
fi
until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; do
  # (Our own child, so its pid is still its own; not `is_ours`, which is false until the child
  # has exec'd the operator and so failed a demo whose first check came before that.)
  ((real_node)) || kill -0 "$operator" 2>/dev/null || { tail -20 "$dir/logs/operator.log"; die "the operator exited"; }
  sleep 0.5
done

# The memory and LangGraph examples need volumes: this cluster has no storage provisioner.
kubectl apply -f - >/dev/null <<PV
apiVersion: v1
kind: PersistentVolume
metadata: {name: demo-archivist-memory}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/agent-supervisor-demo}
  claimRef: {namespace: $ns, name: archivist-memory}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: demo-langgraph-agent-checkpoints}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/agent-supervisor-demo-langgraph}
  claimRef: {namespace: $ns, name: langgraph-agent-checkpoints}
PV

echo
if ((real_node)); then
  # The LangGraph agent in a real container on the real node: the example as it is, with the
  # local image (Python, the SDK, the example's program) and the real node's selector.
  mkdir -p /tmp/agent-supervisor-demo-langgraph
  rm -f /tmp/agent-supervisor-demo-langgraph/*
  chmod 0777 /tmp/agent-supervisor-demo-langgraph
  echo "\$ kubectl apply -n $ns -f examples/   # and examples/langgraph-agent/agent.yaml on the real node"
  kubectl apply -n "$ns" -f examples/
  kubectl patch --local -f examples/langgraph-agent/agent.yaml --type=json -o yaml -p '[
    {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "localhost/agent-python:dev"},
    {"op": "add", "path": "/spec/template/spec/containers/0/imagePullPolicy", "value": "Never"},
    {"op": "add", "path": "/spec/template/spec/containers/0/command",
     "value": ["python3", "/examples/langgraph-agent/agent.py"]},
    {"op": "add", "path": "/spec/template/spec/containers/0/env/-", "value": {"name": "NODE_SECONDS", "value": "2"}},
    {"op": "add", "path": "/spec/template/spec/nodeSelector", "value": {"supervisor.dev/node": "real"}},
    {"op": "add", "path": "/spec/template/spec/tolerations",
     "value": [{"key": "supervisor.dev/node", "operator": "Exists"}]}]' |
    kubectl apply -n "$ns" -f -
  # An agent-sandbox Sandbox whose real container crashes a second after it starts, annotated
  # with a RestartPolicy: the operator makes its Agent; backed off 2 s, 4 s, then the breaker
  # opens.
  echo "\$ kubectl apply -n $ns -f -   # a Sandbox that crashes, annotated supervisor.dev/restart-policy"
  kubectl apply -n "$ns" -f - <<SANDBOX
apiVersion: supervisor.dev/v1alpha1
kind: RestartPolicy
metadata: {name: sandbox-quick}
spec:
  backoff: {type: Exponential, initialDelay: 2s, maxDelay: 30s}
  circuitBreaker: {failureThreshold: 3, openDuration: 5m}
---
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: sandboxed-crasher
  annotations: {supervisor.dev/restart-policy: sandbox-quick}
spec:
  podTemplate:
    spec:
      restartPolicy: Never
      nodeSelector: {supervisor.dev/node: real}
      tolerations: [{key: supervisor.dev/node, operator: Exists}]
      terminationGracePeriodSeconds: 2
      containers:
        - name: agent
          image: localhost/agent-shell:dev
          imagePullPolicy: Never
          command: [sh, -c, "sleep 1; echo 'tool server: connection refused' >/dev/termination-log; exit 3"]
SANDBOX
else
  echo "\$ kubectl apply -n $ns -f examples/ -f examples/langgraph-agent/agent.yaml"
  kubectl apply -n "$ns" -f examples/ -f examples/langgraph-agent/agent.yaml
fi

# Under kwok nothing runs in a pod: play the checkpointing agent's script. Its first pod reports
# steps 10, 30 and 50 on its Lease and crashes at 50; the next resumes from step 50.
wait_pod_running() {
  until [[ "$(kubectl get pod "$1" -n "$ns" -o jsonpath='{.status.phase}' 2>/dev/null)" == Running ]]; do
    sleep 1
  done
}
step_done() {
  kubectl annotate lease summarizer -n "$ns" --overwrite \
    supervisor.dev/progress="$2" supervisor.dev/checkpoint="step-$2" >/dev/null
  kubectl patch lease summarizer -n "$ns" --type=merge -p \
    "{\"spec\":{\"holderIdentity\":\"$1\",\"renewTime\":\"$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)\"}}" >/dev/null
}
play_summarizer() {
  wait_pod_running summarizer-1
  for step in 10 30 50; do
    step_done summarizer-1 "$step"
    sleep 2
  done
  local started
  started=$(kubectl get pod summarizer-1 -n "$ns" -o jsonpath='{.status.startTime}')
  kubectl patch pod summarizer-1 -n "$ns" --subresource=status --type=strategic -p \
    "{\"status\":{\"phase\":\"Failed\",\"containerStatuses\":[{\"name\":\"agent\",\"image\":\"x\",\"imageID\":\"\",\"ready\":false,\"restartCount\":0,\"state\":{\"terminated\":{\"exitCode\":1,\"reason\":\"Error\",\"message\":\"crashing at step 50\",\"startedAt\":\"$started\",\"finishedAt\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"}}}]}}" >/dev/null
  wait_pod_running summarizer-2
  # The second run goes on from step 50, renewing its Lease, until the demo ends (at most a
  # few minutes: it never outlives the demo for long).
  for ((step = 60; step <= 300; step += 10)); do
    step_done summarizer-2 "$step"
    sleep 10
  done
}
play_summarizer &
player=$!

# The LangGraph agent runs for real: hack/podrun.py runs examples/langgraph-agent/agent.py as each
# pod's process (the pod's AGENT_* variables, a token of its ServiceAccount: the SDK renews the
# Lease and reports the graph's checkpoints as the pod would) and writes how it ended into the
# pod's status, as a kubelet would. Its first attempt crashes in the node `research`; the second
# resumes there. The SQLite file, on the claim in a cluster, is a local file here.
graph_db="$dir/langgraph-checkpoints.sqlite"
rm -f "$graph_db"
run_attempt() { # run_attempt POD: the agent's lines of its output
  if ((real_node)); then
    # A real container: wait for it to end, then read its log from the kubelet.
    until [[ "$(kubectl get pod "$1" -n "$ns" -o jsonpath='{.status.phase}' 2>/dev/null)" =~ ^(Succeeded|Failed)$ ]]; do
      sleep 1
    done
    echo "[pod $1: a real container on real-node, $(kubectl get pod "$1" -n "$ns" \
      -o jsonpath='{.status.containerStatuses[0].state.terminated.reason} (exit code {.status.containerStatuses[0].state.terminated.exitCode})')]"
    kubectl logs "$1" -n "$ns" | grep -E 'langgraph-agent: |^RuntimeError' | sed -e 's/^[0-9-]* [0-9:,]* //' || true
    return 0
  fi
  "$py" hack/podrun.py --namespace "$ns" --pod "$1" -- \
    env CHECKPOINT_DB="$graph_db" NODE_SECONDS=2 "$py" examples/langgraph-agent/agent.py \
    >"$dir/logs/$1.log" 2>&1 &
  echo "$!" >"$dir/podrun.pid"
  wait "$!" || true
  echo "[pod $1: its process]"
  grep -E 'langgraph-agent: |podrun: the process|^RuntimeError' "$dir/logs/$1.log" |
    sed -e 's/^[0-9-]* [0-9:,]* //' || true
}
play_langgraph() {
  run_attempt langgraph-agent-1
  # The history names the checkpoint an attempt resumes from as soon as it is made (before its
  # process starts): shown here, while the second attempt is the current one.
  for _ in $(seq 120); do
    [[ "$(kubectl get agent langgraph-agent -n "$ns" -o jsonpath='{.status.attempt}/{.status.resumedFrom}' 2>/dev/null)" == 2/?* ]] && break
    sleep 1
  done
  echo
  echo "\$ kubectl agent history langgraph-agent -n $ns   # attempt 2 starts"
  target/debug/kubectl-agent history langgraph-agent -n "$ns" || true
  echo
  run_attempt langgraph-agent-2
}
play_langgraph >"$dir/logs/langgraph-demo.txt" 2>&1 &
graph_player=$!
for ((t = 0; t < watch_for; t += 15)); do
  sleep 15
  echo
  echo "--- after $((t + 15))s: kubectl get agg,rsp,agents -n $ns"
  kubectl get agg,rsp,agents -n "$ns"
done

show() {
  echo
  echo "\$ kubectl describe $1 $2 -n $ns   # $3"
  kubectl describe "$1" "$2" -n "$ns" | sed -n '/^Status:/,$p'
}
show agent crasher "crashes, backs off, trips the circuit breaker"
if ((real_node)); then
  echo
  echo "\$ kubectl get sandboxes -n $ns"
  kubectl get sandboxes -n "$ns"
  show agent sandboxed-crasher "an agent-sandbox Sandbox: its pod crashes, is backed off, trips the breaker"
fi
show agent spender "ran out of budget: left alone"
show agg crew "restarts the tool server and the workers after it; gives up, and the team restarts it"
show rsp llm-provider "four agents failed with one provider error: one outage, one probe at a time"
show agent caller-4 "its restart is held by the outage"
echo
echo "\$ curl -s 127.0.0.1:$port/metrics | grep -E '^agent_supervisor_(agents|restarts_total|breaker_trips_total|group_restarts_total|group_escalations_total|outages_open|outage_held_agents|outage_events_total|budget_shutdowns_total|spend_cost)'"
curl -s "http://127.0.0.1:$port/metrics" | grep -E '^agent_supervisor_(agents|restarts_total|breaker_trips_total|group_restarts_total|group_escalations_total|outages_open|outage_held_agents|outage_events_total|budget_shutdowns_total|spend_cost)' || true

# The plugin, as a person at a terminal would use it (kubectl runs kubectl-agent from the PATH).
export PATH="$REPO_ROOT/target/debug:$PATH"
plugin() {
  echo
  echo "\$ kubectl agent $* -n $ns"
  kubectl agent "$@" -n "$ns"
}
plugin list
plugin why crasher
plugin why metered-agent
plugin history metered-agent
plugin history crasher
((real_node)) && plugin history sandboxed-crasher
plugin tree
# The player plays the second run until here.
kill "$player" 2>/dev/null || true
plugin why summarizer
plugin history summarizer
echo
echo "\$ kubectl get pod summarizer-2 -n $ns -o jsonpath='{.spec.containers[0].env}'   # resumes from step 50"
kubectl get pod summarizer-2 -n "$ns" -o jsonpath='{range .spec.containers[0].env[*]}{.name}={.value}{"\n"}{end}' | grep -E '^AGENT_(CHECKPOINT|PROGRESS)='

# The LangGraph agent is done well within the watch; a process still running is stopped.
for _ in $(seq 60); do kill -0 "$graph_player" 2>/dev/null || break; sleep 1; done
if kill -0 "$graph_player" 2>/dev/null; then
  [[ -f "$dir/podrun.pid" ]] && stop_ours "$(cat "$dir/podrun.pid")" "$(basename "$py")"
  kill "$graph_player" 2>/dev/null || true
  wait "$graph_player" || true
fi
echo
if ((real_node)); then
  echo "--- The LangGraph agent: examples/langgraph-agent/agent.py in real containers on the real node."
else
  echo "--- The LangGraph agent: examples/langgraph-agent/agent.py, run as each pod's process by"
  echo "--- hack/podrun.py."
fi
echo "--- Its first attempt crashes in the node research; the second resumes there."
cat "$dir/logs/langgraph-demo.txt"
plugin why langgraph-agent

echo
echo "The status page: http://127.0.0.1:$status_port/status (and /status.json)"
curl -s "http://127.0.0.1:$status_port/status" | grep -o '<p id="summary">.*</p>' | sed -e 's/<[^>]*>//g' || true
echo
if [[ "${KEEP:-}" == 1 ]]; then
  echo "Everything keeps running. Reach it with:"
  echo "  eval \"\$(make -s cluster-env)\"; kubectl get agents -n $ns"
  echo "  PATH=\"$REPO_ROOT/target/debug:\$PATH\" kubectl agent list -n $ns"
  echo "  curl 127.0.0.1:$port/metrics"
  echo "  open http://127.0.0.1:$status_port/status"
  echo "Stop it all with: make cluster-down"
fi
