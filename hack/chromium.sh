#!/usr/bin/env bash
# Makes sure headless Chromium is installed: the status page test renders the page in it.
# Chromium comes from the system's packages (Debian's `chromium`), installed only if missing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
command -v apt-get >/dev/null || die "chromium is missing and there is no apt-get to install it: install Chromium (a binary named chromium on the PATH)"
sudo=()
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null || die "chromium is missing; install it as root: apt-get install chromium"
  sudo=(sudo)
fi
log "installing chromium from the system's packages (the status page test renders in it)"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium >/dev/null || die "chromium did not install"
