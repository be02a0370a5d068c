#!/usr/bin/env bash
# Stopping `vllm serve` inside the Ray head container (the container itself belongs to the Ray
# cluster). STOP_VLLM_SERVE_SH defines, for a shell inside the container, stop_serve: SIGTERM, a
# look every 0.1 s until the server is gone, SIGKILL after 30 s; it succeeds when nothing runs and
# prints what it did. stop_vllm_serve CONTAINER runs it in one `docker exec`; vllm-start.sh runs
# it in the same exec that starts the new server. Used by vllm-serve's delete and its restarts.
# stop_vllm_serve succeeds in every state of the container: `vllm serve` is a process started by
# `docker exec`, so a container that is not running (exited, dead, created, being removed, gone,
# or restarting: its processes died with its main one) has none to stop; a paused one is
# unpaused first (a paused server would go on once someone unpauses it). It fails only when the
# server outlives SIGKILL or Docker does not answer. Runs after docker-state.sh.
set -euo pipefail

# It runs in a shell whose command line is this text: no word of it may match "vllm serve" (the
# pattern, written "vllm [s]erve", does not), or the stop would stop the shell that runs it.
STOP_VLLM_SERVE_SH='stop_serve() {
  pkill -f "vllm [s]erve" || { echo "the server was not running"; return 0; }
  for _ in $(seq 1 300); do
    pgrep -f "vllm [s]erve" >/dev/null || { echo "the server stopped"; return 0; }
    sleep 0.1
  done
  pkill -9 -f "vllm [s]erve" || true
  for _ in $(seq 1 50); do
    pgrep -f "vllm [s]erve" >/dev/null || { echo "the server was killed (30 s after SIGTERM)"; return 0; }
    sleep 0.1
  done
  echo "the server still runs after SIGKILL" >&2
  return 1
}
'

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
  if out="$(docker exec "$1" sh -c "$STOP_VLLM_SERVE_SH"'stop_serve' 2>&1)"; then
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
