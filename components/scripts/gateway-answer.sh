#!/usr/bin/env bash
# The end of a gateway step (gateway-routes.sh, gateway-ready.sh), whose check runs in the gateway's
# container: its answer printed when it passed; when it failed, the answer and the tail of the
# gateway's log on standard error, and the step fails.
# Inputs: CONTAINER (the gateway's container).
gateway_answer() { # status answer
  if [ "$1" -ne 0 ]; then
    echo "$2" >&2
    echo "the gateway's log (docker logs $CONTAINER):" >&2
    docker logs --tail 30 "$CONTAINER" >&2 2>&1 || true
    exit 1
  fi
  echo "$2"
}
