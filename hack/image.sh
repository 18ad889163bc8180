#!/usr/bin/env bash
# Container images built without a daemon and without pulling anything: buildah (Debian's, on its
# vfs storage) assembles each from scratch out of files on this machine, and writes an archive
# that `docker load`, `kind load image-archive`, `skopeo copy` and containerd take.
#
#   hack/image.sh node-images        the real node's images, into the cache (a no-op when built):
#                                    localhost/pause:dev (Kubernetes' pause.c, static) and
#                                    localhost/agent-shell:dev (Debian's static busybox) and
#                                    localhost/agent-python:dev (Debian's Python 3.11, the SDK's
#                                    wheel with its LangGraph extra at the SDK's pins, and the
#                                    examples' programs under /examples)
#   hack/image.sh operator           target/image/agent-supervisor.tar, localhost/agent-supervisor:dev:
#                                    the operator's binary (PROFILE=release, or dev) and the Debian
#                                    libraries it links, non-root 65532, no shell; loaded into the
#                                    real node of every running cluster under target/
#   hack/image.sh load DIR FILE      import an image archive into the real node of cluster DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BUILDAH_DIR="$CACHE_DIR/buildah"
buildah_() {
  buildah --root "$BUILDAH_DIR/root" --runroot "$BUILDAH_DIR/run" --storage-driver vfs "$@"
}

# assemble NAME ROOTFS ARCHIVE CONFIG-ARGS...: an image of ROOTFS's files, written to ARCHIVE.
assemble() {
  local name=$1 rootfs=$2 archive=$3 ctr
  shift 3
  command -v buildah >/dev/null || die "buildah not found: run 'make tools'"
  mkdir -p "$BUILDAH_DIR" "$(dirname "$archive")"
  ctr=$(buildah_ from --quiet scratch)
  rm -f "$archive.tmp"
  local ok=0
  buildah_ copy --quiet "$ctr" "$rootfs" / >/dev/null &&
    buildah_ config "$@" "$ctr" &&
    buildah_ commit --quiet --timestamp 0 --omit-history "$ctr" "$name" >/dev/null &&
    buildah_ push --quiet "$name" "docker-archive:$archive.tmp:$name" >/dev/null && ok=1
  # The working container and the image do not pile up in the store.
  buildah_ rm "$ctr" >/dev/null 2>&1 || true
  buildah_ rmi -f "$name" >/dev/null 2>&1 || true
  ((ok)) || die "building the image $name failed"
  mv "$archive.tmp" "$archive"
}

# The inputs' hash: an image is rebuilt only when what goes into it changes.
stamp_of() { cat "$@" | sha256sum | cut -c1-16; }

node_images() {
  mkdir -p "$IMAGES_DIR"
  local pause_c key
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  pause_c="$(cd "$REPO_ROOT/tools/node" && GOTOOLCHAIN=local go mod download -json k8s.io/kubernetes |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')/build/pause/linux/pause.c"
  [[ -f "$pause_c" ]] || die "no pause.c in the kubernetes module ($pause_c)"
  key=$(stamp_of "$pause_c" "$0" <(gcc --version))
  if [[ "$(cat "$IMAGES_DIR/pause.stamp" 2>/dev/null)" != "$key" ]]; then
    mkdir -p "$work/pause"
    gcc -Os -static -DVERSION=agent-supervisor -o "$work/pause/pause" "$pause_c"
    strip "$work/pause/pause"
    assemble localhost/pause:dev "$work/pause" "$IMAGES_DIR/pause.tar" \
      --entrypoint '["/pause"]' --user 65535:65535
    echo "$key" >"$IMAGES_DIR/pause.stamp"
    log "image localhost/pause:dev built ($IMAGES_DIR/pause.tar)"
  fi
  key=$(stamp_of /bin/busybox "$0")
  if [[ "$(cat "$IMAGES_DIR/agent-shell.stamp" 2>/dev/null)" != "$key" ]]; then
    local shell="$work/shell" applet
    mkdir -p "$shell/bin" "$shell/tmp"
    chmod 1777 "$shell/tmp"
    cp /bin/busybox "$shell/bin/busybox"
    for applet in $(/bin/busybox --list); do
      [[ "$applet" == busybox ]] || ln -s busybox "$shell/bin/$applet"
    done
    assemble localhost/agent-shell:dev "$shell" "$IMAGES_DIR/agent-shell.tar" \
      --cmd '["/bin/sh"]' --env PATH=/bin --user 65532:65532
    echo "$key" >"$IMAGES_DIR/agent-shell.stamp"
    log "image localhost/agent-shell:dev built ($IMAGES_DIR/agent-shell.tar)"
  fi
  agent_python "$work"
}

# agent_python WORK: Debian bookworm's essential packages and python3 (mmdebstrap, from Debian's
# mirror like apt; the packages it took are listed in the image's /usr/share/agent-image.txt),
# the SDK's wheel and what its LangGraph extra needs at the SDK's pins, and the examples.
agent_python() {
  local work=$1 key root="$1/python" py wheel
  key=$(stamp_of "$0" "$REPO_ROOT/sdk/python/pyproject.toml" "$REPO_ROOT/sdk/python/requirements-dev.txt" \
    <(cd "$REPO_ROOT" && find sdk/python/src examples/python-agent examples/langgraph-agent -type f \
      -name '*.py' | sort | xargs cat))
  [[ "$(cat "$IMAGES_DIR/agent-python.stamp" 2>/dev/null)" == "$key" ]] && return 0
  log "image localhost/agent-python:dev: building (Debian's python3 by mmdebstrap, the SDK's wheel)"
  command -v mmdebstrap >/dev/null || die "mmdebstrap not found: run 'make tools'"
  # No documentation, manuals or translations: an agent's image needs none of them.
  mmdebstrap --quiet --mode=root --variant=essential --include=python3,ca-certificates \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    bookworm "$root" "deb http://deb.debian.org/debian bookworm main" \
    "deb http://deb.debian.org/debian-security bookworm-security main" ||
    die "mmdebstrap could not make the Python image's root filesystem"
  chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' >"$root/usr/share/agent-image.txt"
  py="$(sdk_venv)"
  "$py" -m build --wheel --no-isolation --outdir "$work/dist" "$REPO_ROOT/sdk/python" >"$work/build.log" 2>&1 ||
    { cat "$work/build.log" >&2; die "the SDK's wheel did not build"; }
  wheel=("$work"/dist/agent_supervisor-*.whl)
  # The venv's Python is 3.11, as Debian's is: the same wheels fit.
  "$py" -m pip --disable-pip-version-check --no-input --quiet install --no-compile \
    --target "$root/usr/local/lib/python3.11/dist-packages" \
    --constraint "$REPO_ROOT/sdk/python/requirements-dev.txt" \
    "${wheel[0]}[langgraph]" langgraph-checkpoint-sqlite ||
    die "installing the SDK into the Python image failed"
  mkdir -p "$root/examples"
  cp -r "$REPO_ROOT/examples/python-agent" "$REPO_ROOT/examples/langgraph-agent" "$root/examples/"
  assemble localhost/agent-python:dev "$root" "$IMAGES_DIR/agent-python.tar" \
    --cmd '["python3"]' --env PYTHONUNBUFFERED=1 --env PYTHONDONTWRITEBYTECODE=1 \
    --user 65532:65532
  echo "$key" >"$IMAGES_DIR/agent-python.stamp"
  log "image localhost/agent-python:dev built ($IMAGES_DIR/agent-python.tar, $(du -h "$IMAGES_DIR/agent-python.tar" | cut -f1))"
}

# load DIR FILE: into cluster DIR's real node, if it runs one.
load() {
  local dir=$1 file=$2 sock="$1/node/containerd/containerd.sock"
  [[ -S "$sock" ]] || return 0
  ctr --address "$sock" --namespace k8s.io images import --no-unpack "$file" >/dev/null ||
    die "importing $file into the real node of $dir failed"
  log "loaded $(basename "$file") into the real node of $dir"
}

operator() {
  local profile=${PROFILE:-release} bin lib out="$REPO_ROOT/target/image/agent-supervisor.tar"
  local flags=(--locked --bin agent-supervisor)
  [[ "$profile" == release ]] && flags+=(--release)
  log "building the operator ($profile)"
  (cd "$REPO_ROOT" && cargo build "${flags[@]}")
  bin="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/$([[ "$profile" == release ]] && echo release || echo debug)/agent-supervisor"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/root/usr/local/bin" "$work/root/tmp"
  chmod 1777 "$work/root/tmp"
  cp "$bin" "$work/root/usr/local/bin/agent-supervisor"
  [[ "$profile" == release ]] || strip --strip-debug "$work/root/usr/local/bin/agent-supervisor"
  # The libraries it links (Debian's libc6 and libgcc-s1), at the paths the loader looks.
  for lib in $(ldd "$bin" | awk '/=> \// { print $3 } /^\t\/lib/ { print $1 }'); do
    mkdir -p "$work/root$(dirname "$lib")"
    cp -L "$lib" "$work/root$lib"
  done
  # The user 65532 by name, as distroless's nonroot image (the Dockerfile's base) has it.
  mkdir -p "$work/root/etc"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$work/root/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$work/root/etc/group"
  # The loader's path inside the image is the one the binary asks for (/lib64 on amd64).
  assemble localhost/agent-supervisor:dev "$work/root" "$out" \
    --entrypoint '["/usr/local/bin/agent-supervisor"]' --user 65532:65532 --port 8080
  log "image localhost/agent-supervisor:dev: $out ($(du -h "$out" | cut -f1))"
  local dir
  for dir in "$REPO_ROOT"/target/cluster "$REPO_ROOT"/target/test-cluster; do
    [[ -d "$dir" ]] && load "$dir" "$out"
  done
  return 0
}

case ${1:-} in
  node-images) node_images ;;
  operator) operator ;;
  load) [[ $# == 3 ]] || die "usage: hack/image.sh load DIR FILE"; load "$2" "$3" ;;
  *) die "usage: hack/image.sh node-images|operator|load DIR FILE" ;;
esac
