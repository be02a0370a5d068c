# shellcheck shell=bash
# The proving ground's image registry, sourced by test/sim/sim.sh (after images.sh, whose rootfs
# and import steps it uses).
#
# A real one: Debian's `docker-registry` package (the CNCF distribution registry) in an image built
# like the others (debootstrap rootfs + apt-get in a chroot + `docker import`, cached under a content
# hash of its recipe: images.sh, this file and registry/config.yml). `sim.sh up --registry` runs it
# as a container of the cluster (same label, so `sim.sh down` removes it) at a fixed address on the
# management network, 10.230.<slot>.250:5000, plain HTTP; every node's dockerd is created trusting
# it (`insecure-registries` in the node's /etc/docker/daemon.json, written at `up`). `sim.sh push`
# puts an image into it through node 0's dockerd and prints its name pinned by digest, as the
# registry reports it.

readonly SIM_IMAGE_REGISTRY_REPO="vllm-fleet-sim/registry"
readonly SIM_REGISTRY_PORT=5000
# Last octet of the registry on the management network: the gateway is .1, the nodes .10 to .17,
# the hub stand-in (test/e2e/hubStandIn.ts) .5; Docker hands out addresses from .2 up.
readonly SIM_REGISTRY_HOST_OCTET=250
# The suite of the nodes' own (trixie): its docker-registry is distribution 2.8.3.
readonly SIM_REGISTRY_SUITE="$SIM_NODE_SUITE"
readonly -a SIM_REGISTRY_PACKAGES=(docker-registry)

sim_registry_tag() {
  printf '%s:%s' "$SIM_IMAGE_REGISTRY_REPO" \
    "$(sim_inputs_hash "$SIM_LIB_DIR/registry.sh" "$SIM_DIR/registry/config.yml")"
}
sim_registry_container() { printf '%s-registry' "$1"; }
sim_registry_address() { printf '10.230.%s.%s:%s' "$1" "$SIM_REGISTRY_HOST_OCTET" "$SIM_REGISTRY_PORT"; }

sim_build_registry() { # tag
  local rootfs
  sim_prepare_rootfs "$SIM_REGISTRY_SUITE" "${SIM_REGISTRY_PACKAGES[@]}"
  rootfs="$SIM_WORK/rootfs"
  install -m 644 "$SIM_DIR/registry/config.yml" "$rootfs/etc/docker/registry/config.yml"
  # The package's user (made by its postinst) owns the storage directory; the registry runs as it.
  sim_import_rootfs "$1" "ENV PATH=$SIM_IMAGE_PATH" "USER docker-registry" "EXPOSE $SIM_REGISTRY_PORT" \
    'CMD ["/usr/bin/docker-registry", "serve", "/etc/docker/registry/config.yml"]' \
    "LABEL vllm-fleet.sim.image=registry"
}

# Build (or reuse) the registry image under the build lock; print its tag. Older tags of it are
# removed after a rebuild (one a running registry still uses is kept: docker rmi refuses it).
sim_registry_image() {
  local tag
  tag="$(sim_registry_tag)"
  sim_build_begin
  sim_ensure_image "$tag" sim_build_registry "$tag"
  if ((SIM_BUILT)); then sim_prune_repository "$SIM_IMAGE_REGISTRY_REPO" "$tag"; fi
  sim_build_end
  printf '%s\n' "$tag"
}

# The node's daemon.json: the node image's (node/daemon.json) trusting the registry at ADDRESS
# over plain HTTP, as a Spark owner's /etc/docker/daemon.json would for a registry on their LAN.
sim_registry_daemon_json() { # address
  python3 - "$SIM_DIR/node/daemon.json" "$1" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
config["insecure-registries"] = [sys.argv[2]]
print(json.dumps(config, indent=2))
PY
}

# Before a created node starts: its dockerd trusts the registry (its daemon.json replaced; a copy
# is kept in the cluster's state dir).
sim_registry_trust() { # node-container address state-dir
  local file="$3/daemon.json"
  sim_registry_daemon_json "$2" >"$file"
  docker cp "$file" "$1:/etc/docker/daemon.json"
}

# Start the cluster's registry (or keep the running one of the same image) and wait until it
# answers /v2/ (from this machine, which reaches the management network as its gateway).
sim_registry_start() { # cluster slot
  local cluster="$1" slot="$2" tag name address deadline
  tag="$(sim_registry_image)" || sim_die "building the registry image failed"
  name="$(sim_registry_container "$cluster")"
  address="$(sim_registry_address "$slot")"
  if [[ "$(docker inspect -f "{{.State.Running}}|{{index .Config.Labels \"$SIM_LABEL.registry-image\"}}|{{index .Config.Labels \"$SIM_LABEL.registry-address\"}}" "$name" 2>/dev/null)" != "true|$tag|$address" ]]; then
    docker rm -f -v "$name" >/dev/null 2>&1 || true
    docker run -d --name "$name" --hostname registry --stop-timeout 2 \
      --label "$SIM_LABEL=$cluster" --label "$SIM_LABEL.role=registry" \
      --label "$SIM_LABEL.registry-image=$tag" --label "$SIM_LABEL.registry-address=$address" \
      --network "$(mgmt_net "$cluster")" --ip "${address%:*}" "$tag" >/dev/null
  fi
  sim_need_cmd curl curl
  deadline=$((SECONDS + SIM_READY_TIMEOUT))
  until curl -sf -o /dev/null --max-time 2 "http://$address/v2/"; do
    if [[ "$(docker inspect -f '{{.State.Running}}' "$name")" != "true" ]]; then
      docker logs --tail 30 "$name" >&2 || true
      sim_die "registry $name stopped while starting (log above)"
    fi
    ((SECONDS < deadline)) || sim_die "registry $name ($address) not answering /v2/ after ${SIM_READY_TIMEOUT}s"
    sleep 0.5
  done
  sim_log "registry $address ($name, $tag)"
}

# The cluster's registry address, or nothing when it has none running.
sim_registry_of() { # cluster
  docker inspect -f "{{if .State.Running}}{{index .Config.Labels \"$SIM_LABEL.registry-address\"}}{{end}}" \
    "$(sim_registry_container "$1")" 2>/dev/null || true
}

# Push IMAGE (of this machine's engine, else node 0's) into the cluster's registry as REPO[:TAG]
# (default tag latest) through node 0's dockerd (loaded there first unless it has that image), then untag it
# there, so that no node holds the registry's name for it until something pulls it. Prints the
# name pinned by the digest the registry reports for the tag (`<registry>/<repo>@sha256:...`).
sim_registry_push() { # cluster image repo[:tag]
  local cluster="$1" image="$2" ref="$3" registry node repo tag want have out pushed reported
  registry="$(sim_registry_of "$cluster")"
  [[ -n "$registry" ]] || sim_die "cluster $cluster has no registry running: bring it up with sim.sh up --registry"
  [[ "$ref" =~ ^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$ ]] ||
    sim_die "push: '$ref' is not a repository[:tag] (lowercase path components, e.g. vllm-fleet/workload:e2e)"
  repo="${ref%%:*}"
  tag="latest"
  [[ "$ref" != *:* ]] || tag="${ref#*:}"
  node="$(node_name "$cluster" 0)"
  want="$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)"
  have="$(docker exec "$node" docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)"
  if [[ -z "$want" ]]; then
    # Not (or no longer: a rebuild elsewhere prunes old tags) on this machine: node 0's, if it has one.
    [[ -n "$have" ]] || sim_die "push: no image $image on this machine's engine nor on $node"
    sim_log "push: $image is not on this machine's engine; pushing $node's"
  elif [[ "$have" != "$want" ]]; then
    sim_log "push: loading $image into $node"
    docker save "$image" | docker exec -i "$node" docker load -q >/dev/null
  fi
  docker exec "$node" docker tag "$image" "$registry/$repo:$tag"
  out="$(docker exec "$node" docker push "$registry/$repo:$tag" 2>&1)" || {
    printf '%s\n' "$out" >&2
    sim_die "push: docker push $registry/$repo:$tag from $node failed (output above)"
  }
  pushed="$(grep -o 'digest: sha256:[0-9a-f]\{64\}' <<<"$out" | tail -n 1 | cut -d' ' -f2)"
  # What the registry itself says the tag is, for any manifest type a pusher may have stored.
  reported="$(curl -sfI --max-time 10 \
    -H 'Accept: application/vnd.oci.image.index.v1+json' \
    -H 'Accept: application/vnd.docker.distribution.manifest.list.v2+json' \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    "http://$registry/v2/$repo/manifests/$tag" | tr -d '\r' | awk -F': ' 'tolower($1) == "docker-content-digest" {print $2}')"
  [[ "$reported" =~ ^sha256:[0-9a-f]{64}$ ]] || sim_die "push: the registry reports no digest for $repo:$tag"
  [[ "$reported" == "$pushed" ]] || sim_die "push: docker push said $pushed, the registry reports $reported for $repo:$tag"
  docker exec "$node" docker image rm "$registry/$repo:$tag" "$registry/$repo@$reported" >/dev/null 2>&1 || true
  sim_log "pushed $image as $registry/$repo:$tag ($reported) from $node"
  printf '%s/%s@%s\n' "$registry" "$repo" "$reported"
}
