#!/usr/bin/env bash
# Tests the Python SDK (sdk/python): builds its wheel with the standard tools, installs it into a
# virtualenv of the pinned sdk/python/requirements-dev.txt, and runs pytest against the installed
# wheel (not the source tree), so packaging is proven too.
#
#   hack/sdk.sh           ruff (the SDK, hack/podrun.py and the example agents' programs), mypy
#                         --strict (the SDK) and the unit tests (tests/test_examples.py runs
#                         those programs)
#   hack/sdk.sh cluster   the tests against a real API server (sdk/python/tests/cluster): each
#                         runs the operator binary and the SDK's agents, as pods' processes
#                         (hack/podrun.py). Needs TEST_KUBECONFIG (a cluster with fake nodes, as
#                         `make cluster-up` starts) and the binary: AGENT_SUPERVISOR_BIN, by
#                         default target/debug/agent-supervisor (`cargo build`). Fails, never
#                         skips, without either.
#
# The virtualenv lives in the project's cache (see sdk_venv in hack/lib.sh).
# SDK_PYTHON  the interpreter to make the virtualenv with (default: python3; Python >= 3.10)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mode="${1:-unit}"
case "$mode" in
unit) ;;
cluster)
  [[ -n "${TEST_KUBECONFIG:-}" ]] ||
    die "hack/sdk.sh cluster needs TEST_KUBECONFIG: a cluster's kubeconfig (make cluster-up; TEST_KUBECONFIG=target/cluster/kubeconfig)"
  [[ -r "$TEST_KUBECONFIG" ]] || die "TEST_KUBECONFIG=$TEST_KUBECONFIG is not a readable file"
  export AGENT_SUPERVISOR_BIN="${AGENT_SUPERVISOR_BIN:-$REPO_ROOT/target/debug/agent-supervisor}"
  [[ -x "$AGENT_SUPERVISOR_BIN" ]] ||
    die "no operator binary at $AGENT_SUPERVISOR_BIN: run cargo build (or set AGENT_SUPERVISOR_BIN)"
  # (Absolute: the tests run in sdk/python.)
  TEST_KUBECONFIG="$(realpath "$TEST_KUBECONFIG")"
  AGENT_SUPERVISOR_BIN="$(realpath "$AGENT_SUPERVISOR_BIN")"
  export TEST_KUBECONFIG AGENT_SUPERVISOR_BIN
  # kubectl (the CRDs) from the pinned tools.
  export PATH="$TOOLS_PATH:$PATH"
  command -v kubectl >/dev/null || die "no kubectl in $KUBERNETES_BIN: run make tools"
  ;;
*) die "usage: hack/sdk.sh [unit|cluster]" ;;
esac

sdk="$REPO_ROOT/sdk/python"
py="$(sdk_venv)"
log "the SDK on $("$py" -V)"
pip=("$py" -m pip --disable-pip-version-check --no-input --quiet)

dist="$(mktemp -d)"
trap 'rm -rf "$dist"' EXIT
log "building the SDK's wheel"
"$py" -m build --wheel --no-isolation --outdir "$dist" "$sdk" >"$dist/build.log" 2>&1 ||
  { cat "$dist/build.log" >&2; die "the SDK's wheel did not build"; }
wheel=("$dist"/agent_supervisor-*.whl)
"${pip[@]}" install --no-deps --force-reinstall "${wheel[0]}"
"$py" -m pip check >/dev/null || { "$py" -m pip check >&2; die "requirements-dev.txt misses a package"; }

cd "$sdk"
export PYTHONDONTWRITEBYTECODE=1
if [[ "$mode" == unit ]]; then
  log "ruff"
  # hack/podrun.py, a test helper, and the example agents under the SDK's rules.
  others=("$REPO_ROOT/hack/podrun.py" "$REPO_ROOT"/examples/*/*.py)
  "$py" -m ruff check --no-cache . "${others[@]}"
  "$py" -m ruff format --check --no-cache . "${others[@]}"
  log "mypy --strict"
  "$py" -m mypy --strict --no-incremental src/agent_supervisor
  log "pytest"
  "$py" -m pytest -p no:cacheprovider -q
else
  log "pytest against $(kubectl --kubeconfig="$TEST_KUBECONFIG" config view --minify -o jsonpath='{.clusters[0].cluster.server}') (operator: $AGENT_SUPERVISOR_BIN)"
  "$py" -m pytest -p no:cacheprovider -q -rA tests/cluster
fi
