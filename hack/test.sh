#!/usr/bin/env bash
# Runs the whole test suite against a control plane of its own, started here and stopped after.
#
# Set TEST_KUBECONFIG to use a cluster you already have instead (for example after
# `make cluster-up`: TEST_KUBECONFIG=target/cluster/kubeconfig). An exported KUBECONFIG is not
# used: the tests create and delete things, on no cluster but one chosen for them.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
export PATH="$TOOLS_PATH:$PATH"
# Headless Chromium renders the status page in its test.
hack/chromium.sh
hack/sdk.sh
# The SDK claims Python >= 3.10: its unit tests on the lowest and the newest Python here too.
for python in $(sdk_pythons); do
  SDK_PYTHON="$python" hack/sdk.sh
done
# The release workflow lints and the chart packages (docs/releasing.md).
hack/release-check.sh

if [[ -z "${TEST_KUBECONFIG:-}" ]]; then
  dir="$REPO_ROOT/target/test-cluster"
  trap 'hack/cluster.sh down --dir "$dir"' EXIT
  # --owner-pid: even if this script is killed, the cluster does not outlive it.
  # With agent-sandbox (its CRDs and controller): the Sandboxes the operator supervises.
  AGENT_SANDBOX=1 hack/cluster.sh up --dir "$dir" --owner-pid $$
  export TEST_KUBECONFIG="$dir/kubeconfig"
fi
export KUBECONFIG="$TEST_KUBECONFIG"
# The operator's image, for the real node's tests (the test binary loads it into the node).
PROFILE=dev hack/image.sh operator
log "testing against $(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
# The benchmarks, once each, as a smoke test (their figures come from `cargo bench`).
cargo test --locked --benches
# The scale benchmark, tiny, on this cluster: the harness works and every figure it prints is
# present and sane; never a speed (`make bench-scale` measures).
bench=0
BENCH_KUBECONFIG="$TEST_KUBECONFIG" BENCH_PROFILE=dev BENCH_CHECK=1 N=5 M=3 STORM=5 QUIET=3 \
  hack/bench-scale.sh || bench=$?
# Integration tests mostly wait on the API server: run many at once, each in its own namespace.
results="$(mktemp)"
trap 'rm -f "$results"; [[ -n "${dir:-}" ]] && hack/cluster.sh down --dir "$dir"' EXIT
status=0
cargo test --locked --lib --bins --tests --no-fail-fast -- --test-threads="${TEST_THREADS:-16}" 2>&1 |
  tee "$results" || status=$?
# The Python SDK against this cluster: the operator binary, and agents run as their pods'
# processes (hack/podrun.py).
sdk=0
{ cargo build --locked --bin agent-supervisor && hack/sdk.sh cluster; } || sdk=$?
# One closing line for the whole suite, summed over every test binary.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "suite: %d passed, %d failed\n", p, f }' "$results"
if ((sdk == 0)); then
  echo "sdk against the API server: passed"
else
  echo "sdk against the API server: FAILED (hack/sdk.sh cluster exited with $sdk)"
  status=1
fi
((bench == 0)) || { log "the scale benchmark's smoke run failed"; status=1; }
exit "$status"
