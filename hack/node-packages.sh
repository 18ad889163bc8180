#!/usr/bin/env bash
# Installs the real node's Debian packages, pinned by version: the container runtime (containerd,
# runc), its network (the CNI plugins, iptables, conntrack for kube-proxy), and what builds
# images without a daemon (buildah, busybox-static, mmdebstrap). A no-op when all are installed
# at these versions. `make tools` runs it unless REAL_NODE=0.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Debian 12 (bookworm) versions; a point release that moves one makes this say which.
PACKAGES=(
  containerd=1.6.20~ds1-1+deb12u3
  runc=1.1.5+ds1-1+deb12u1
  containernetworking-plugins=1.1.1+ds1-3+b5
  iptables=1.8.9-2
  conntrack=1:1.4.7-1+b2
  buildah=1.28.2+ds1-3+deb12u1+b3
  busybox-static=1:1.35.0-4+deb12u1+b1
  mmdebstrap=1.3.5-7
)

missing=()
for spec in "${PACKAGES[@]}"; do
  name=${spec%%=*} want=${spec#*=}
  have=$(dpkg-query -W -f '${Status} ${Version}' "$name" 2>/dev/null || true)
  [[ "$have" == "install ok installed $want" ]] || missing+=("$spec")
done
if ((${#missing[@]} == 0)); then
  log "real node packages: installed"
  exit 0
fi

command -v apt-get >/dev/null || die "the real node needs Debian packages (${missing[*]}) and there is no apt-get: install them, or set REAL_NODE=0"
sudo=()
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null || die "the real node needs, as root: apt-get install ${missing[*]} (or set REAL_NODE=0)"
  sudo=(sudo)
fi
log "installing the real node's packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
# --no-install-recommends: buildah recommends fuse-overlayfs and crun, neither of which works here
# (images are built on vfs; crun refuses this machine's hybrid cgroups).
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
  die "apt-get install ${missing[*]} failed (a version no longer served? see hack/node-packages.sh)"
log "real node packages installed"
