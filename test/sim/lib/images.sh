# shellcheck shell=bash
# Image recipe of the proving ground, sourced by test/sim/sim.sh.
#
# No container registry is reachable, so both images are built from a Debian rootfs made by
# `debootstrap --variant=minbase` (tarball cached outside the repo), finished with apt-get (and
# pip, offline from cached wheels) in a chroot and imported with `docker import`: the BASE
# images. The sim's own files (stand-ins, node boot script) are then added on top as a small
# second layer with `docker create` + `docker cp` + `docker commit`, so editing a stand-in
# rebuilds seconds, not minutes. Every tag carries a content hash of its inputs; a warm run
# reuses them. Editing this file rebuilds everything.

# The nodes run the newest Docker engine Debian offers (trixie's docker.io 26.1, with containerd
# 1.7 and its image store); the workload image stays on bookworm, whose Python 3.11 the locked
# wheels (workload/requirements.lock, cp311) and the stand-in's install path are made for: an
# image's userland need not match its host's, as a vLLM image's Ubuntu does not match DGX OS.
readonly SIM_NODE_SUITE="trixie"
readonly SIM_WORKLOAD_SUITE="bookworm"
readonly SIM_DEBIAN_MIRROR="${SIM_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
readonly SIM_IMAGE_NODE_REPO="vllm-fleet-sim/node"
readonly SIM_IMAGE_WORKLOAD_REPO="vllm-fleet-sim/workload"
readonly SIM_IMAGE_ALIAS="current"
readonly SIM_IMAGE_PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# A simulated Spark: DGX OS-like userland with sshd, Docker 26.1 (trixie's docker.io; its CLI is
# the docker-cli package there), and python3/rsync/curl as a real Spark has them.
readonly -a SIM_NODE_PACKAGES=(
  openssh-server docker.io docker-cli iproute2 iptables procps python3 rsync curl ca-certificates
  iputils-ping sudo
)
# The workload: Debian's python3 + pip, real Ray from PyPI (workload/requirements.lock), and
# the tools a vLLM image has; HAProxy, the gateway's proxy in front of vllm-router, from Debian's
# package (the gateway e2e runs this image as the gateway's). The vLLM stand-in is added in the
# second layer.
readonly -a SIM_WORKLOAD_PACKAGES=(
  python3 python3-pip iproute2 curl procps ca-certificates haproxy
)

sim_cache_dir() {
  printf '%s/vllm-fleet/sim' "${XDG_CACHE_HOME:-$HOME/.cache}"
}

# Content hash (12 hex) of this recipe and the given files.
sim_inputs_hash() {
  local file
  {
    printf 'recipe %s %s %s\n' "$SIM_NODE_SUITE" "$SIM_WORKLOAD_SUITE" "$SIM_DEBIAN_MIRROR"
    for file in "$SIM_LIB_DIR/images.sh" "$@"; do
      printf '== %s\n' "${file#"$SIM_DIR"/}"
      cat "$file"
    done
  } | sha256sum | cut -c1-12
}

# Files of the second layer: "source|destination|mode".
sim_node_files() {
  printf '%s\n' \
    "node/sim-node-init|/usr/local/sbin/sim-node-init|755" \
    "node/nvidia-smi|/usr/bin/nvidia-smi|755" \
    "node/ibdev2netdev|/usr/bin/ibdev2netdev|755" \
    "node/nvidia-container-runtime-hook|/usr/bin/nvidia-container-runtime-hook|755" \
    "node/daemon.json|/etc/docker/daemon.json|644" \
    "node/sshd_config.conf|/etc/ssh/sshd_config.d/vllm-fleet-sim.conf|644"
}
# The vLLM stand-in is a Python package `vllm` (workload/vllm/, real vLLM's module layout) with
# its dist-info (so importlib.metadata.version("vllm") works) and the `vllm` console script,
# installed where pip puts packages for Debian's python3.
readonly SIM_WORKLOAD_PYLIB="/usr/local/lib/python3.11/dist-packages"
readonly SIM_VLLM_DIST_INFO="vllm-0.17.1+vllm.fleet.standin.dist-info"
sim_workload_files() {
  local file
  printf '%s\n' \
    "workload/vllm-console-script|/usr/local/bin/vllm|755" \
    "node/nvidia-smi|/usr/bin/nvidia-smi|755"
  while read -r file; do
    printf '%s|%s/%s|644\n' "$file" "$SIM_WORKLOAD_PYLIB" "${file#workload/}"
  done < <(cd "$SIM_DIR" && find workload/vllm -type f -name '*.py' | LC_ALL=C sort)
  while read -r file; do
    printf '%s|%s/%s/%s|644\n' "$file" "$SIM_WORKLOAD_PYLIB" "$SIM_VLLM_DIST_INFO" "${file#workload/vllm.dist-info/}"
  done < <(cd "$SIM_DIR" && find workload/vllm.dist-info -type f | LC_ALL=C sort)
}

sim_files_hash() { # base-tag files-function
  local base="$1" entry
  local -a sources=()
  while IFS='|' read -r entry _; do sources+=("$SIM_DIR/$entry"); done < <("$2")
  { printf '%s\n' "$base"; "$2"; cat "${sources[@]}"; } | sha256sum | cut -c1-12
}

# Tags. Bases: recipe (+ lock). Finals: base + the second layer's files.
sim_node_base_tag() { printf '%s-base:%s' "$SIM_IMAGE_NODE_REPO" "$(sim_inputs_hash)"; }
sim_workload_base_tag() {
  printf '%s-base:%s' "$SIM_IMAGE_WORKLOAD_REPO" \
    "$(sim_inputs_hash "$SIM_DIR/workload/requirements.lock" "$SIM_DIR/workload/libnvidia-ml-standin.c")"
}
sim_node_tag() { printf '%s:%s' "$SIM_IMAGE_NODE_REPO" "$(sim_files_hash "$(sim_node_base_tag)" sim_node_files)"; }
sim_workload_tag() {
  printf '%s:%s' "$SIM_IMAGE_WORKLOAD_REPO" "$(sim_files_hash "$(sim_workload_base_tag)" sim_workload_files)"
}

sim_need_cmd() { # cmd debian-package
  if ! command -v "$1" >/dev/null 2>&1; then
    sim_log "installing $2 (for $1)"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$2" >/dev/null 2>&1; then
      apt-get update >/dev/null
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$2" >/dev/null
    fi
  fi
}

# Run a command inside a chroot with a clean environment (the host's PIP_*, proxies etc.
# must not leak in).
sim_chroot() { # rootfs cmd...
  local rootfs="$1"
  shift
  chroot "$rootfs" /usr/bin/env -i PATH="$SIM_IMAGE_PATH" HOME=/root LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive "$@"
}

# Build dirs (and their mounts) of this run; removed by sim_build_cleanup, also on error or
# interrupt. A dir that still has a mount under it is never deleted.
SIM_BUILD_DIRS=()
SIM_BUILD_CONTAINER=""

sim_build_cleanup() {
  local dir mnt
  for dir in "${SIM_BUILD_DIRS[@]}"; do
    [[ -d "$dir" ]] || continue
    while read -r mnt; do
      umount -l "$mnt" 2>/dev/null || true
    done < <(findmnt -rn -o TARGET | grep -F "$dir/" | sort -r)
    if findmnt -rn -o TARGET | grep -qF "$dir/"; then
      sim_log "WARNING: mounts remain under $dir; not removing it"
      continue
    fi
    rm -rf "$dir"
  done
  SIM_BUILD_DIRS=()
  if [[ -n "$SIM_BUILD_CONTAINER" ]]; then
    docker rm -f "$SIM_BUILD_CONTAINER" >/dev/null 2>&1 || true
    SIM_BUILD_CONTAINER=""
  fi
}

# The cached debootstrap rootfs tarball (minbase) of a suite, made on first use.
# Sets SIM_BASE_TARBALL.
sim_base_rootfs() { # suite
  local suite="$1" cache key work
  cache="$(sim_cache_dir)"
  key="$(printf '%s %s minbase' "$suite" "$SIM_DEBIAN_MIRROR" | sha256sum | cut -c1-12)"
  SIM_BASE_TARBALL="$cache/rootfs-$suite-minbase-$key.tar"
  [[ -s "$SIM_BASE_TARBALL" ]] && return
  sim_need_cmd debootstrap debootstrap
  work="$(mktemp -d "$cache/build.XXXXXX")"
  SIM_BUILD_DIRS+=("$work")
  sim_log "debootstrap --variant=minbase $suite from $SIM_DEBIAN_MIRROR (cached in $cache)"
  if ! debootstrap --variant=minbase "$suite" "$work/rootfs" "$SIM_DEBIAN_MIRROR" >"$work/debootstrap.log" 2>&1; then
    tail -n 30 "$work/debootstrap.log" >&2
    sim_die "debootstrap failed (log above)"
  fi
  tar -C "$work/rootfs" --numeric-owner -cf "$SIM_BASE_TARBALL.tmp" .
  mv "$SIM_BASE_TARBALL.tmp" "$SIM_BASE_TARBALL"
  sim_build_cleanup
}

# Unpack the base into a fresh build dir and install packages. Sets SIM_WORK (the build dir;
# the rootfs is $SIM_WORK/rootfs).
sim_prepare_rootfs() { # suite packages...
  local suite="$1" rootfs
  shift
  sim_base_rootfs "$suite"
  SIM_WORK="$(mktemp -d "$(sim_cache_dir)/build.XXXXXX")"
  SIM_BUILD_DIRS+=("$SIM_WORK")
  rootfs="$SIM_WORK/rootfs"
  mkdir -p "$rootfs"
  tar -C "$rootfs" --numeric-owner -xpf "$SIM_BASE_TARBALL"
  printf 'deb %s %s main\n' "$SIM_DEBIAN_MIRROR" "$suite" >"$rootfs/etc/apt/sources.list"
  cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
  # No service may start inside the chroot.
  printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
  chmod 755 "$rootfs/usr/sbin/policy-rc.d"
  mount -t proc proc "$rootfs/proc"
  if ! {
    sim_chroot "$rootfs" apt-get update &&
      sim_chroot "$rootfs" apt-get install -y --no-install-recommends "$@"
  } >"$SIM_WORK/apt.log" 2>&1; then
    tail -n 30 "$SIM_WORK/apt.log" >&2
    sim_die "apt-get in the build chroot failed (log above)"
  fi
}

# Strip caches, undo build-only changes, import as an image.
sim_import_rootfs() { # tag docker-import-change...
  local tag="$1" rootfs="$SIM_WORK/rootfs" change
  shift
  sim_chroot "$rootfs" apt-get clean
  umount "$rootfs/proc"
  rm -f "$rootfs/usr/sbin/policy-rc.d"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/tmp/* \
    "$rootfs"/var/log/apt/* "$rootfs"/root/.cache
  : >"$rootfs/etc/resolv.conf"
  local -a changes=()
  for change in "$@"; do changes+=(--change "$change"); done
  tar -C "$rootfs" --numeric-owner -c . | docker import "${changes[@]}" - "$tag" >/dev/null
  sim_build_cleanup
}

sim_build_node_base() { # tag
  local rootfs
  sim_prepare_rootfs "$SIM_NODE_SUITE" "${SIM_NODE_PACKAGES[@]}"
  rootfs="$SIM_WORK/rootfs"
  # DGX OS: a login user in the docker group and an administrator (sudo without a password, as
  # security.firewall needs; a Spark's first user is in the sudo group); key-only SSH; host keys
  # made per node at boot.
  sim_chroot "$rootfs" useradd --create-home --shell /bin/bash --groups docker spark
  sim_chroot "$rootfs" usermod --password '*' spark
  printf 'spark ALL=(root) NOPASSWD: ALL\n' > "$rootfs/etc/sudoers.d/spark"
  chmod 0440 "$rootfs/etc/sudoers.d/spark"
  rm -f "$rootfs"/etc/ssh/ssh_host_*
  sim_import_rootfs "$1" "ENV PATH=$SIM_IMAGE_PATH" 'CMD ["/bin/bash"]'
}

# Wheels for the lock, downloaded once (by the host's pip) into the cache. Sets SIM_WHEELS.
sim_wheels_dir() {
  local lock="$SIM_DIR/workload/requirements.lock"
  SIM_WHEELS="$(sim_cache_dir)/wheels/$(sha256sum "$lock" | cut -c1-12)"
  [[ -f "$SIM_WHEELS/.complete" ]] && return
  python3 -m pip --version >/dev/null 2>&1 || sim_need_cmd pip3 python3-pip
  mkdir -p "$SIM_WHEELS"
  sim_log "downloading the wheels of workload/requirements.lock into $SIM_WHEELS"
  python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 --platform manylinux1_x86_64 \
    --python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none \
    -r "$lock" -d "$SIM_WHEELS" >&2 || sim_die "pip download failed"
  touch "$SIM_WHEELS/.complete"
}

sim_build_workload_base() { # tag
  local rootfs libdir
  sim_wheels_dir
  sim_need_cmd cc gcc
  sim_prepare_rootfs "$SIM_WORKLOAD_SUITE" "${SIM_WORKLOAD_PACKAGES[@]}"
  rootfs="$SIM_WORK/rootfs"
  mkdir -p "$rootfs/tmp/wheels"
  cp "$SIM_WHEELS"/*.whl "$rootfs/tmp/wheels/"
  cp "$SIM_DIR/workload/requirements.lock" "$rootfs/tmp/requirements.lock"
  if ! {
    sim_chroot "$rootfs" python3 -m pip install --no-index --no-deps --no-cache-dir \
      --break-system-packages --find-links /tmp/wheels -r /tmp/requirements.lock &&
      sim_chroot "$rootfs" python3 -m pip check
  } >"$SIM_WORK/pip.log" 2>&1; then
    tail -n 30 "$SIM_WORK/pip.log" >&2
    sim_die "pip install in the build chroot failed (log above)"
  fi
  # The NVML stand-in, where a real driver puts libnvidia-ml.so.1 (the host's cc is a
  # bookworm gcc too, same glibc).
  libdir="$rootfs/usr/lib/x86_64-linux-gnu"
  cc -shared -fPIC -O2 -Wall -Wl,-soname,libnvidia-ml.so.1 \
    -o "$libdir/libnvidia-ml.so.1" "$SIM_DIR/workload/libnvidia-ml-standin.c"
  ln -sf libnvidia-ml.so.1 "$libdir/libnvidia-ml.so"
  sim_import_rootfs "$1" "ENV PATH=$SIM_IMAGE_PATH" 'CMD ["/bin/bash"]'
}

# Second layer: copy the sim's files into a container of the base and commit it.
sim_commit_files() { # base-tag tag files-function docker-commit-change...
  local base="$1" tag="$2" files_fn="$3" stage src dest mode change
  shift 3
  SIM_WORK="$(mktemp -d "$(sim_cache_dir)/build.XXXXXX")"
  SIM_BUILD_DIRS+=("$SIM_WORK")
  stage="$SIM_WORK/stage"
  while IFS='|' read -r src dest mode; do
    install -D -m "$mode" "$SIM_DIR/$src" "$stage$dest"
  done < <("$files_fn")
  SIM_BUILD_CONTAINER="vllm-fleet-sim-build-$$"
  # No label here: docker commit would copy it into the image.
  docker create --name "$SIM_BUILD_CONTAINER" "$base" true >/dev/null
  tar -C "$stage" --owner=0 --group=0 --numeric-owner -c . | docker cp - "$SIM_BUILD_CONTAINER:/"
  local -a changes=()
  for change in "$@"; do changes+=(--change "$change"); done
  docker commit "${changes[@]}" "$SIM_BUILD_CONTAINER" "$tag" >/dev/null
  sim_build_cleanup
}

sim_remove_build_containers() {
  docker ps -aq --filter name='^vllm-fleet-sim-build-' | xargs -r docker rm -f >/dev/null
}

SIM_BUILT=0
sim_ensure_image() { # tag build-function args...
  local tag="$1"
  shift
  if docker image inspect "$tag" >/dev/null 2>&1; then
    sim_log "image $tag: cached"
    return
  fi
  sim_log "building image $tag"
  "$@"
  SIM_BUILT=1
}

# sim_stale_images KEEP...: reads image references (repo:tag, one a line) on stdin and prints
# those of the proving ground's repositories that are neither KEEP nor the `current` alias.
# Printing nothing is not a failure: after a fresh build there is nothing to prune.
sim_stale_images() {
  local ref keep wanted
  while read -r ref; do
    [[ "$ref" =~ ^($SIM_IMAGE_NODE_REPO|$SIM_IMAGE_WORKLOAD_REPO)(-base)?: ]] || continue
    wanted=0
    for keep in "$SIM_IMAGE_NODE_REPO:$SIM_IMAGE_ALIAS" "$SIM_IMAGE_WORKLOAD_REPO:$SIM_IMAGE_ALIAS" "$@"; do
      if [[ "$ref" == "$keep" ]]; then wanted=1; break; fi
    done
    if ((!wanted)); then printf '%s\n' "$ref"; fi
  done
  return 0
}

# After a rebuild: drop the older hash tags of our repos (an image a container still uses
# is kept: docker rmi refuses it).
sim_prune_images() { # tags to keep...
  local ref stale
  stale="$(docker images --format '{{.Repository}}:{{.Tag}}' | sim_stale_images "$@")"
  for ref in $stale; do
    docker rmi "$ref" >/dev/null 2>&1 || true
  done
}

# Build (or reuse) both images; print the two tags, node first.
# Takes the cache's build lock (one build at a time per cache), removes the leftovers of an
# interrupted build and has the ones of this build removed at exit. sim_build_end releases it.
sim_build_begin() {
  local cache stale
  cache="$(sim_cache_dir)"
  mkdir -p "$cache"
  exec {SIM_LOCK_FD}>"$cache/.build.lock"
  flock "$SIM_LOCK_FD"
  for stale in "$cache"/build.*; do
    if [[ -d "$stale" ]]; then SIM_BUILD_DIRS+=("$stale"); fi
  done
  sim_remove_build_containers
  sim_build_cleanup
  trap sim_build_cleanup EXIT
  trap 'exit 130' INT TERM
}

sim_build_end() {
  trap - EXIT INT TERM
  exec {SIM_LOCK_FD}>&-
}

# Removes every tag of REPOSITORY but the ones named (docker rmi refuses one a container uses).
sim_prune_repository() { # repository keep...
  local repository="$1" ref keep
  shift
  for ref in $(docker images --format '{{.Repository}}:{{.Tag}}' "$repository"); do
    for keep in "$@"; do
      [[ "$ref" == "$keep" ]] && continue 2
    done
    docker rmi "$ref" >/dev/null 2>&1 || true
  done
}

sim_images() {
  local node_base workload_base node_tag workload_tag
  node_base="$(sim_node_base_tag)"
  workload_base="$(sim_workload_base_tag)"
  node_tag="$(sim_node_tag)"
  workload_tag="$(sim_workload_tag)"
  sim_build_begin

  sim_ensure_image "$node_base" sim_build_node_base "$node_base"
  sim_ensure_image "$node_tag" sim_commit_files "$node_base" "$node_tag" sim_node_files \
    'CMD ["/usr/local/sbin/sim-node-init"]' "LABEL vllm-fleet.sim.image=node"
  sim_ensure_image "$workload_base" sim_build_workload_base "$workload_base"
  # Like the vllm/vllm-openai image: the entrypoint launches a server (launchers override it).
  # This Ray is the minimal install (no dashboard/metrics agent): without the ENV, every Ray
  # process logs "Failed to establish connection to the metrics exporter agent", a sim artifact.
  sim_ensure_image "$workload_tag" sim_commit_files "$workload_base" "$workload_tag" sim_workload_files \
    "ENV LANG=C.UTF-8" "ENV NVIDIA_VISIBLE_DEVICES=all" \
    "ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility" \
    "ENV RAY_enable_metrics_collection=0" \
    'ENTRYPOINT ["vllm", "serve"]' 'CMD []' "LABEL vllm-fleet.sim.image=workload"

  docker tag "$node_tag" "$SIM_IMAGE_NODE_REPO:$SIM_IMAGE_ALIAS"
  docker tag "$workload_tag" "$SIM_IMAGE_WORKLOAD_REPO:$SIM_IMAGE_ALIAS"
  if ((SIM_BUILT)); then
    sim_prune_images "$node_base" "$node_tag" "$workload_base" "$workload_tag"
  fi
  sim_build_end
  printf '%s\n%s\n' "$node_tag" "$workload_tag"
}
