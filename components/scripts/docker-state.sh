#!/usr/bin/env bash
# What each state of a container means to the programs that stop, remove or use one. Docker's
# states (State.Status): created, running, paused, restarting, removing, exited, dead; and `gone`,
# no container of that name. A paused or restarting container counts as running to Docker
# (State.Running is true) but takes no `docker exec` ("... is paused, unpause the container before
# exec", "... is restarting, wait until the container is running"); only `running` does.
# Defines:
#   container_status NAME   prints NAME's state, or `gone`; fails, in one line, only when Docker does
#                           not answer (then nobody can tell whether NAME is there).
#   remove_container NAME   removes NAME in whatever state (`docker rm -f` kills a running, paused or
#                           restarting one first), waits for a removal already under way; prints
#                           `removed NAME` or `no container NAME`. Fails only while NAME is still there.
#   one_line TEXT           TEXT on one line (Docker's multi-line answers, quoted in a message).
set -euo pipefail

one_line() { printf '%s' "$1" | tr -s '\n' ' ' | sed 's/ *$//'; }

container_status() {
  local out
  # --type container: an image or a network of that name is not the container.
  if out="$(docker inspect --type container --format '{{.State.Status}}' "$1" 2>&1)"; then
    printf '%s\n' "$out"
    return 0
  fi
  case "$out" in
    *"No such container"* | *"No such object"*) echo gone ;;
    *)
      echo "Docker on this node does not answer, so nobody can tell the state of container $1: $(one_line "$out")" >&2
      return 1
      ;;
  esac
}

remove_container() {
  local name="$1" status out="" attempts=0 looks=0
  status="$(container_status "$name")" || return 1
  if [ "$status" = gone ]; then
    echo "no container $name"
    return 0
  fi
  while true; do
    case "$status" in
      gone)
        # Removed meanwhile, by us or by the removal that was under way.
        echo "removed $name"
        return 0
        ;;
      removing) ;; # another removal is under way ("removal of container ... is already in progress"): its end is awaited
      *)
        # A paused one is thawed first, so that its processes die as in any other removal. After a
        # `docker rm -f` of a paused rank on Docker 26.1 the next container's runc init on that node
        # was once seen to die at its start ("waiting for init preliminary setup: read init-p:
        # connection reset by peer"); not reproduced since, so this is a precaution, not a proven fix.
        [ "$status" != paused ] || docker unpause "$name" >/dev/null 2>&1 || true
        if out="$(docker rm -f "$name" 2>&1)"; then
          echo "removed $name"
          return 0
        fi
        # Lost a race: another removal began, or (Docker before 25) the container exited as it
        # was killed ("Could not kill running container ..."). A look again decides.
        attempts=$((attempts + 1))
        ;;
    esac
    looks=$((looks + 1))
    if [ "$attempts" -ge 3 ] || [ "$looks" -ge 600 ]; then
      echo "cannot remove container $name (it is $status): $(one_line "${out:-its removal under way did not end within 60 s}")" >&2
      return 1
    fi
    sleep 0.1
    status="$(container_status "$name")" || return 1
  done
}
