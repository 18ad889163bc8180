#!/usr/bin/env bash
# Runs the whole test suite against a control plane of its own, started here and stopped after.
#
# Set KUBECONFIG to use a cluster you already have instead (for example `make cluster-up` and
# `eval "$(make -s cluster-env)"`).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
export PATH="$TOOLS_PATH:$PATH"

if [[ -z "${KUBECONFIG:-}" ]]; then
  dir="$REPO_ROOT/target/test-cluster"
  trap 'hack/cluster.sh down --dir "$dir"' EXIT
  # --owner-pid: even if this script is killed, the cluster does not outlive it.
  hack/cluster.sh up --dir "$dir" --owner-pid $$
  export KUBECONFIG="$dir/kubeconfig"
fi
log "testing against $(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
# The benchmarks, once each, as a smoke test (their figures come from `cargo bench`).
cargo test --locked --benches
# Integration tests mostly wait on the API server: run many at once, each in its own namespace.
results="$(mktemp)"
trap 'rm -f "$results"; [[ -n "${dir:-}" ]] && hack/cluster.sh down --dir "$dir"' EXIT
status=0
cargo test --locked --lib --bins --tests --no-fail-fast -- --test-threads="${TEST_THREADS:-16}" 2>&1 |
  tee "$results" || status=$?
# One closing line for the whole suite, summed over every test binary.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "suite: %d passed, %d failed\n", p, f }' "$results"
exit "$status"
