# shellcheck shell=bash
# The monitoring image of the proving ground, sourced by test/sim/sim.sh after images.sh (whose
# rootfs and import steps it uses). See "The monitoring image" in test/sim/README.md.
#
# The product's monitoring runs Prometheus on a node and a node exporter on every node, by default
# from the official images (prom/prometheus, prom/node-exporter); no registry is reachable here, so
# this image stands for both: Debian trixie's `prometheus` and `prometheus-node-exporter` packages
# (the newest Prometheus Debian offers) in a debootstrap rootfs, `docker import`ed like the others.
# It is made to look like the official images where the product depends on them:
#   - the binaries at the official images' paths, /bin/prometheus and /bin/node_exporter (/bin is
#     /usr/bin on trixie; node_exporter is a symlink to Debian's prometheus-node-exporter);
#   - user nobody (65534), and /prometheus, the official image's data directory, owned by it;
#   - no entrypoint and no command: the product always sets both;
#   - a shell and coreutils (sh, cat, mv, mkdir, chown, rm), which the official images have from
#     busybox: the product writes its files into the running container with
#     `docker exec -u 0 -i ... sh -c` and prepares the data directory with
#     `docker run --rm --user 0 --entrypoint sh`.
#
# Kept in its own file so that editing this recipe does not rebuild the node and workload images
# (their tags hash images.sh); this image's tag hashes both files. One image, no second layer.

readonly SIM_IMAGE_MONITORING_REPO="vllm-fleet-sim/monitoring"
# trixie: Prometheus 2.53.3 and node_exporter 1.9.0 (bookworm's are 2.42 and 1.5). With promtool
# (a dependency of the package; the official image has it too) and the libjs-* packages of Debian's
# classic web UI (the package has no React UI; the HTTP API is what the product uses).
readonly SIM_MONITORING_SUITE="trixie"
readonly -a SIM_MONITORING_PACKAGES=(prometheus prometheus-node-exporter)
# The official images' user and data directory.
readonly SIM_MONITORING_UID=65534
readonly SIM_MONITORING_DATA_DIR="/prometheus"

sim_monitoring_tag() {
  printf '%s:%s' "$SIM_IMAGE_MONITORING_REPO" "$(sim_inputs_hash "$SIM_LIB_DIR/monitoring-image.sh")"
}

sim_build_monitoring() { # tag
  local rootfs file
  sim_prepare_rootfs "$SIM_MONITORING_SUITE" "${SIM_MONITORING_PACKAGES[@]}"
  rootfs="$SIM_WORK/rootfs"
  ln -s prometheus-node-exporter "$rootfs/usr/bin/node_exporter"
  install -d -o "$SIM_MONITORING_UID" -g "$SIM_MONITORING_UID" -m 755 "$rootfs$SIM_MONITORING_DATA_DIR"
  # Nothing here is read at run time: documentation, manual pages, translations.
  rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
    "$rootfs"/usr/share/locale/* "$rootfs"/usr/share/lintian/*
  for file in /bin/prometheus /bin/node_exporter /bin/sh /bin/cat /bin/mv /bin/mkdir /bin/chown /bin/rm; do
    sim_chroot "$rootfs" test -x "$file" || sim_die "the monitoring image lacks $file"
  done
  sim_log "monitoring image: $(sim_chroot "$rootfs" /bin/prometheus --version 2>&1 | head -n 1)"
  sim_log "monitoring image: $(sim_chroot "$rootfs" /bin/node_exporter --version 2>&1 | head -n 1)"
  sim_import_rootfs "$1" "ENV PATH=$SIM_IMAGE_PATH" "USER nobody" "WORKDIR $SIM_MONITORING_DATA_DIR" \
    "LABEL vllm-fleet.sim.image=monitoring"
}

# Build (or reuse) the monitoring image under the build lock and tag it :current; print its tag.
# Older tags of its repository are dropped after a rebuild (docker rmi refuses one a container
# still uses).
sim_monitoring_image() {
  local tag
  tag="$(sim_monitoring_tag)"
  sim_build_begin
  sim_ensure_image "$tag" sim_build_monitoring "$tag"
  docker tag "$tag" "$SIM_IMAGE_MONITORING_REPO:$SIM_IMAGE_ALIAS"
  if ((SIM_BUILT)); then
    sim_prune_repository "$SIM_IMAGE_MONITORING_REPO" "$tag" "$SIM_IMAGE_MONITORING_REPO:$SIM_IMAGE_ALIAS"
  fi
  sim_build_end
  printf '%s\n' "$tag"
}
