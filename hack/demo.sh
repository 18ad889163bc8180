#!/usr/bin/env bash
# The demonstration: a local control plane with fake nodes.
#
#   KEEP=1 hack/demo.sh   leave everything running afterwards
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
export PATH="$TOOLS_PATH:$PATH"
dir="$REPO_ROOT/target/cluster"
export KUBECONFIG="$dir/kubeconfig"

if [[ "${KEEP:-}" != 1 ]]; then
  trap 'hack/cluster.sh down --dir "$dir"' EXIT
fi
hack/cluster.sh up --dir "$dir"

echo
echo '$ kubectl get nodes -o wide'
kubectl get nodes -o wide
echo
if [[ "${KEEP:-}" == 1 ]]; then
  echo 'The cluster keeps running. Reach it with:'
  echo '  eval "$(make -s cluster-env)"; kubectl get nodes'
  echo 'Stop it with: make cluster-down'
fi
