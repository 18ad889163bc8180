#!/usr/bin/env bash
# Checks the release without GitHub: lints the workflows with actionlint and packages the Helm
# chart the way .github/workflows/release.yml does, with helm from hack/tools.sh.
#
# actionlint is built from the pinned Go module tools/actionlint/ into
# $CACHE_DIR/tools/actionlint-<version>/bin, rebuilt only when its go.mod or go.sum change.
# It runs shellcheck on the workflows' `run:` scripts when shellcheck is on the PATH.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

mod="$REPO_ROOT/tools/actionlint"
version="$(sed -n 's|^[[:space:]]*github.com/rhysd/actionlint \(v[^ ]*\).*|\1|p' "$mod/go.mod")"
[[ -n "$version" ]] || die "no github.com/rhysd/actionlint version in $mod/go.mod"
bin="$(tool_dir actionlint "$version")/bin"
stamp="$(dirname "$bin")/.stamp"
want="$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -d' ' -f1)"
if [[ ! -x "$bin/actionlint" || ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  command -v go >/dev/null || die "go is not installed; actionlint is built from tools/actionlint"
  log "actionlint $version: building into $bin"
  mkdir -p "$bin"
  rm -f "$stamp"
  (cd "$mod" && GOTOOLCHAIN=local CGO_ENABLED=0 \
    GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly -trimpath" \
    go build -ldflags "-s -w -X github.com/rhysd/actionlint.version=$version" \
    -o "$bin/actionlint" github.com/rhysd/actionlint/cmd/actionlint) ||
    die "building actionlint $version failed"
  echo "$want" >"$stamp"
fi

shopt -s nullglob
workflows=(.github/workflows/*.yml .github/workflows/*.yaml)
((${#workflows[@]})) || die "no workflows under .github/workflows"
command -v shellcheck >/dev/null || log "shellcheck is not on the PATH: run: scripts go unchecked"
log "actionlint $version: ${workflows[*]}"
"$bin/actionlint" -no-color "${workflows[@]}" ||
  die "actionlint found problems in the workflows (above)"

# The chart, packaged as the release job packages it.
helm="$HELM_BIN/helm"
[[ -x "$helm" ]] || die "no helm at $helm: run hack/tools.sh (make tools) first"
check=0.0.0-check
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$helm" package charts/agent-supervisor --version "$check" --app-version "$check" -d "$tmp" >/dev/null ||
  die "helm package charts/agent-supervisor failed"
tgz="$tmp/agent-supervisor-$check.tgz"
[[ -f "$tgz" ]] || die "helm package made no $(basename "$tgz")"
chart="$("$helm" show chart "$tgz")" || die "helm show chart $(basename "$tgz") failed"
grep -qx "version: $check" <<<"$chart" || die "the packaged chart's version is not $check"
grep -qE "^appVersion: \"?$check\"?$" <<<"$chart" || die "the packaged chart's appVersion is not $check"
log "chart: $(basename "$tgz") packages, version and appVersion $check"
log "release check passed"
