#!/usr/bin/env bash
# The end of a step that waits on a container (the gateway's routes and readiness, Prometheus's
# targets, Grafana's dashboard): its answer printed when it passed; when it failed, the answer and
# the tail of the container's log on standard error, and the step fails.
# Inputs: CONTAINER; step_answer's third argument names the log ("the gateway's").
step_answer() { # status answer whose-log
  if [ "$1" -ne 0 ]; then
    echo "$2" >&2
    echo "$3 log (docker logs $CONTAINER):" >&2
    docker logs --tail 30 "$CONTAINER" >&2 2>&1 || true
    exit 1
  fi
  echo "$2"
}
