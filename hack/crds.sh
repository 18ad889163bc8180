#!/usr/bin/env bash
# Regenerates crds/, the chart's CRDs and docs/fields.md from the Rust types.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
dirs=(crds)
[[ -d charts/agent-supervisor ]] && dirs+=(charts/agent-supervisor/crds)
rm -f crds/*.yaml
mkdir -p docs
cargo run --quiet --locked --bin crdgen -- "${dirs[@]}" --fields docs/fields.md
log "wrote CRDs into ${dirs[*]}, and docs/fields.md"
