#!/usr/bin/env bash
# The content identity of an image on this node: the same on Docker's classic image store and on its
# containerd image store, and across `docker save` / `docker load` between them. Docker's own id
# (`docker image inspect .Id`) is not: the classic store's is the digest of the image's config, the
# containerd store's (the default of fresh Docker 29 installs) the digest of the manifest or index the
# image was pulled, built or loaded as (moby's daemon/containerd/image_inspect.go: `ID:
# target.Digest`), and a save on one store loaded on the other gets another id (docker/cli#6670,
# moby/moby#48401); a containerd store's save of a multi-platform image keeps only the platforms
# present, under another index (moby/moby#44833). The config digest itself is what both keep, but
# the containerd store's inspect does not show it.
#
# What both stores' inspect do show alike, read from the config of the platform this node runs
# (containerd: the best match of the index; classic: the one image there is): the platform, the
# ordered layer diff ids (RootFS.Layers: digests of the uncompressed layers, which a save/load
# keeps), and the settings a container takes from the image (entrypoint, command, environment,
# user, working directory, labels, exposed ports, volumes, stop signal). The identity is sha256 over
# that, written in a fixed order: map keys sorted (Go templates range over maps in key order),
# strings length-prefixed (nothing a value holds can pass for another line), empty fields left out
# (the classic store shows an image without config as `null`, the containerd store as `{}`). What it
# leaves out changes nothing a container runs: the creation time, the history, the author.
#
# Defines:
#   image_identity IMAGE   prints `sha256:<64 hex>`; fails naming IMAGE when this node has no such
#                          image, or no layers of it for this node's platform.
#   image_facts IMAGE      prints `identity <identity>`, `id <Docker's id>` and one
#                          `repo-digest <name@sha256:...>` per registry digest the node knows, or
#                          nothing when the image is not here (the probe's `image` section:
#                          infra/core/facts.ts parseImageFacts).
#   image_pythonpath IMAGE prints `pythonpath <the image's own PYTHONPATH>` (empty when it sets none):
#                          its config's environment, not a container's, whose may hold vllm-fleet's.
# bash and the docker CLI only (and sha256sum).
set -euo pipefail

# A Go template for docker (its $name and $value are the template's variables, not the shell's).
# shellcheck disable=SC2016
IMAGE_IDENTITY_FORMAT='vllm-fleet image identity 1
platform {{.Os}} {{.Architecture}} {{.Variant}}
{{range .RootFS.Layers}}layer {{.}}
{{end}}{{with .Config}}{{range .Entrypoint}}entrypoint {{len .}}:{{.}}
{{end}}{{range .Cmd}}cmd {{len .}}:{{.}}
{{end}}{{range .Env}}env {{len .}}:{{.}}
{{end}}{{with .User}}user {{len .}}:{{.}}
{{end}}{{with .WorkingDir}}workdir {{len .}}:{{.}}
{{end}}{{range $name, $value := .Labels}}label {{len $name}}:{{$name}} {{len $value}}:{{$value}}
{{end}}{{range $port, $_ := .ExposedPorts}}port {{$port}}
{{end}}{{range $path, $_ := .Volumes}}volume {{len $path}}:{{$path}}
{{end}}{{with .StopSignal}}stopsignal {{.}}
{{end}}{{end}}'

image_identity() {
  local described
  if ! described="$(docker image inspect --format "$IMAGE_IDENTITY_FORMAT" "$1" 2>&1)"; then
    echo "no image $1 on this node: $(printf '%s' "$described" | tr -s '\n' ' ')" >&2
    return 1
  fi
  case "$described" in
    *$'\nlayer sha256:'*) ;;
    *)
      echo "image $1 on this node has no layers for this node's platform (a multi-platform image pulled for another one?)" >&2
      return 1
      ;;
  esac
  printf 'sha256:%s\n' "$(printf '%s\n' "$described" | sha256sum | cut -d' ' -f1)"
}

image_facts() {
  local identity
  identity="$(image_identity "$1" 2>/dev/null)" || return 0
  echo "identity $identity"
  docker image inspect --format '{{printf "id %s\n" .Id}}{{range .RepoDigests}}{{printf "repo-digest %s\n" .}}{{end}}' "$1" 2>/dev/null | grep . || true
}

image_pythonpath() {
  echo "pythonpath $(docker image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$1" 2>/dev/null | sed -n 's/^PYTHONPATH=//p' | tail -n 1)"
}

# The node's image store, for the facts: Docker's storage driver, then its status pairs one a line
# (`key=value`); the containerd image store says `driver-type=io.containerd.snapshotter.v1`
# (infra/core/facts.ts parseImageStore).
image_store() {
  docker info --format '{{.Driver}}{{range .DriverStatus}}{{printf "\n%s=%s" (index . 0) (index . 1)}}{{end}}' 2>/dev/null || true
}
