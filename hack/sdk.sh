#!/usr/bin/env bash
# Tests the Python SDK (sdk/python): builds its wheel with the standard tools, installs it into a
# virtualenv of the pinned sdk/python/requirements-dev.txt, and runs ruff and pytest against the
# installed wheel (not the source tree), so packaging is proven too.
#
# The virtualenv lives in the project's cache, one per set of pins and Python version:
# $CACHE_DIR/venv/sdk-<hash>. It is made once and reused; a change of pins makes a new one.
#
# SDK_PYTHON  the interpreter to make the virtualenv with (default: python3; Python >= 3.10)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

sdk="$REPO_ROOT/sdk/python"
python="${SDK_PYTHON:-python3}"
command -v "$python" >/dev/null || die "no $python: install Python >= 3.10 (or set SDK_PYTHON)"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
  die "the SDK needs Python >= 3.10; $python is $("$python" -V 2>&1)"

key="$({ cat "$sdk/requirements-dev.txt"; "$python" -c 'import sys; print(sys.version)'; } |
  sha256sum | cut -c1-16)"
venv="$CACHE_DIR/venv/sdk-$key"
py="$venv/bin/python"
pip=("$py" -m pip --disable-pip-version-check --no-input --quiet)

mkdir -p "$CACHE_DIR/venv"
# Two runs at once make the virtualenv once.
exec 9>"$venv.lock"
flock 9
if [[ ! -f "$venv/.complete" ]]; then
  log "making the SDK's virtualenv (pinned requirements) at $venv"
  rm -rf "$venv"
  "$python" -m venv "$venv" || die "$python -m venv failed: install the venv module (Debian: python3-venv)"
  # Exactly the pins, nothing resolved: `pip check` below says if one is missing.
  "${pip[@]}" install --no-deps --require-virtualenv -r "$sdk/requirements-dev.txt"
  touch "$venv/.complete"
fi
flock -u 9

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
log "ruff"
"$py" -m ruff check --no-cache .
"$py" -m ruff format --check --no-cache .
log "pytest"
"$py" -m pytest -p no:cacheprovider -q
