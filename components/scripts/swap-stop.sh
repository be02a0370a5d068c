#!/usr/bin/env bash
# Stops the containers of a service that leaves the config, before a new service that cannot run
# beside it starts on this node (a swap that stops the old service first: infra/core/plan/swaps.ts).
# Stopped, not removed: the old service's own delete at the end of the up removes them (its removal
# takes a container in any state), and a failed up leaves them there, stopped, to be read as such.
# A container stopped by hand is not restarted by Docker's policy (on-failure, unless-stopped).
# Inputs: NAMES (array: the containers, the watchdog first, which would start vLLM again); runs
#         after docker-state.sh.
set -euo pipefail

for name in "${NAMES[@]}"; do
  status="$(container_status "$name")"
  case "$status" in
    gone) echo "no container $name" ;;
    running | paused | restarting)
      out="$(docker stop "$name" 2>&1)" || {
        echo "stopping container $name failed: $(one_line "$out")" >&2
        exit 1
      }
      echo "stopped $name"
      ;;
    *) echo "container $name was not running ($status)" ;;
  esac
done
