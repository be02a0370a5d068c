#!/usr/bin/env bash
# Pulls the image on this node (image.source pull) and reports its content identity
# (image-identity.sh). A name pinned by digest (`repo@sha256:...`, `repo:tag@sha256:...`) is pulled
# by that digest, and what arrived is checked: the node must know the image by that registry
# digest (RepoDigests), else the tag is not trusted and the step fails naming what it got.
# A failed pull says why in the daemon's words and what to do (pull_failure_remedy).
# Once the image is there, the step leaves its mark (image-mark.sh): the next run keeps the step while
# the image stays, and pulls again once it is gone.
# Inputs: IMAGE, DIGEST (the pin's `sha256:...`, or empty for a tag), IMAGE_KEY (the config key that
# names the image, e.g. vllm-fleet:image.name), MARK and REVISION (the delivery's mark); runs after
# docker-state.sh (one_line), image-identity.sh and image-mark.sh.
set -euo pipefail

# The registry an image name is pulled from, as Docker reads the name: its first component when that
# has a '.' or a ':' or is localhost, else Docker Hub.
image_registry() {
  local first="${1%%/*}"
  if [[ "$1" == */* && ( "$first" == *.* || "$first" == *:* || "$first" == localhost ) ]]; then
    printf '%s' "$first"
  else
    printf 'docker.io'
  fi
}

# What to do about a failed pull, from the daemon's error (as Docker 20.10 to 28 word it, e.g. against
# the distribution registry: `manifest for <name> not found: manifest unknown: manifest unknown`).
# Kept short: a step's reason is clipped to 500 characters, its start and its end (run-step.sh).
pull_failure_remedy() { # error
  local registry what
  registry="$(image_registry "$IMAGE")"
  what="tag"
  [ -z "$DIGEST" ] || what="digest"
  case "$1" in
    *"server gave HTTP response to HTTPS client"*)
      echo "$registry serves plain HTTP, which this node's Docker does not trust; the fix is on the node: add \"insecure-registries\": [\"$registry\"] to /etc/docker/daemon.json and restart Docker (or serve it over TLS)" ;;
    *"manifest unknown"* | *"name unknown"* | *"not found"*)
      echo "$registry has no manifest for that $what: push the image there, or correct $IMAGE_KEY (pinned: name@sha256:<the digest the registry reports after the push>)" ;;
    *"docker login"* | *unauthorized* | *denied*)
      echo "$registry refused this node's credentials; the fix is on the node: docker login $registry as the SSH user, or correct $IMAGE_KEY" ;;
    *"connection refused"* | *"no such host"* | *"i/o timeout"* | *"deadline exceeded"* | *"no route to host"* | *"network is unreachable"* | *"TLS handshake timeout"*)
      echo "this node cannot reach $registry; the fix is on the node or the registry: check that it runs and the node reaches it (name, route, firewall, proxy), or correct $IMAGE_KEY" ;;
    *)
      echo "expected this node to pull it from $registry: check $IMAGE_KEY and the node's access to the registry" ;;
  esac
}

if ! out="$(docker pull --quiet "$IMAGE" 2>&1)"; then
  out="$(one_line "$out")"
  echo "docker pull $IMAGE failed: ${out#Error response from daemon: }; $(pull_failure_remedy "$out")" >&2
  exit 1
fi
if [ -n "$DIGEST" ]; then
  digests="$(docker image inspect --format '{{range .RepoDigests}}{{println .}}{{end}}' "$IMAGE" 2>/dev/null || true)"
  if ! printf '%s\n' "$digests" | grep -q "@${DIGEST}\$"; then
    echo "docker pull $IMAGE gave an image this node does not know by $DIGEST (its registry digests: $(one_line "$digests" | grep . || echo none)); expected the pinned build" >&2
    exit 1
  fi
fi
identity="$(image_identity "$IMAGE")"
mark_delivered "$MARK" "$REVISION" "$IMAGE"
echo "image-pulled $IMAGE $identity"
