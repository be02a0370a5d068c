#!/usr/bin/env bash
# Stopping `vllm serve` inside the Ray head container (the container itself belongs to the Ray
# cluster): stop_vllm_serve CONTAINER runs the lifecycle's stop (vllm-lifecycle.sh: SIGTERM, a look
# every 0.1 s until the server is gone, SIGKILL after 30 s) in one `docker exec` and prints its line.
# Used by vllm-serve's delete; the start (vllm-start.sh) stops the server in its own exec.
# Inputs: LIFECYCLE (the text of vllm-lifecycle.sh).
# stop_vllm_serve succeeds in every state of the container: `vllm serve` is a process started by
# `docker exec`, so a container that is not running (exited, dead, created, being removed, gone,
# or restarting: its processes died with its main one) has none to stop; a paused one is
# unpaused first (a paused server would go on once someone unpauses it). It fails only when the
# server outlives SIGKILL or Docker does not answer. Runs after docker-state.sh.
set -euo pipefail

stop_vllm_serve() {
  local status out
  status="$(container_status "$1")" || return 1
  case "$status" in
    gone)
      echo "no container $1"
      return 0
      ;;
    running) ;;
    paused)
      # Unpaused by someone else meanwhile: the exec below tells.
      docker unpause "$1" >/dev/null 2>&1 || true
      echo "unpaused container $1 to stop the server in it"
      ;;
    *)
      echo "the server was not running (container $1 is $status)"
      return 0
      ;;
  esac
  if out="$(docker exec "$1" sh -c "$LIFECYCLE" vllm-lifecycle stop 2>&1)"; then
    [ -z "$out" ] || printf '%s\n' "$out"
    return 0
  fi
  # The container stopped (or went) under the exec: nothing runs in it any more.
  status="$(container_status "$1")" || return 1
  case "$status" in
    running | paused)
      echo "stopping vllm serve in container $1 failed: $(one_line "$out")" >&2
      return 1
      ;;
    gone) echo "no container $1 (gone meanwhile)" ;;
    *) echo "the server was not running (container $1 is $status)" ;;
  esac
}
