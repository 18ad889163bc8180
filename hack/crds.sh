#!/usr/bin/env bash
# Regenerates crds/ and the chart's CRDs from the Rust types.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
dirs=(crds)
[[ -d charts/agent-supervisor ]] && dirs+=(charts/agent-supervisor/crds)
rm -f crds/*.yaml
cargo run --quiet --locked --bin crdgen -- "${dirs[@]}"
log "wrote CRDs into ${dirs[*]}"
