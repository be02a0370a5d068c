#!/usr/bin/env bash
# Starts `vllm serve` inside the Ray head container and waits until it really serves: /v1/models
# lists the model and one completion answers. A log line is not readiness (a server can hang after
# "Application startup complete"). On a crash or timeout, fails with the tail of the server log.
# Inputs: CONTAINER, SERVE_ARGS (array: arguments of `vllm`), PORT, SERVED_NAME, TIMEOUT (seconds),
#         API_KEY (may be empty).
set -euo pipefail

log=/tmp/vllm-fleet-serve.log
# A restart (changed arguments) first stops the server that runs now.
docker exec "$CONTAINER" pkill -f "vllm serve" >/dev/null 2>&1 || true
for _ in $(seq 1 30); do
  docker exec "$CONTAINER" pgrep -f "vllm serve" >/dev/null 2>&1 || break
  sleep 1
done

# The arguments travel as "$@" of a fixed shell line, never spliced into it.
docker exec --detach --env "VLLM_API_KEY=$API_KEY" "$CONTAINER" \
  sh -c 'exec "$@" >"$0" 2>&1' "$log" vllm "${SERVE_ARGS[@]}"
echo "started: vllm ${SERVE_ARGS[*]}"

probe() {
  docker exec -i --env "VLLM_API_KEY=$API_KEY" "$CONTAINER" python3 - "$PORT" "$SERVED_NAME" "$1" <<'PY'
import json, os, sys, urllib.request
port, model, what = sys.argv[1], sys.argv[2], sys.argv[3]
headers = {"Content-Type": "application/json"}
if os.environ.get("VLLM_API_KEY"):
    headers["Authorization"] = "Bearer " + os.environ["VLLM_API_KEY"]
base = f"http://127.0.0.1:{port}/v1"
if what == "models":
    with urllib.request.urlopen(urllib.request.Request(base + "/models", headers=headers), timeout=5) as r:
        ids = [m["id"] for m in json.load(r)["data"]]
    sys.exit(0 if model in ids else 1)
body = json.dumps({"model": model, "prompt": "Say hello.", "max_tokens": 16, "temperature": 0}).encode()
with urllib.request.urlopen(urllib.request.Request(base + "/completions", data=body, headers=headers), timeout=120) as r:
    print(json.dumps(json.load(r)))
PY
}

deadline=$((SECONDS + TIMEOUT))
until probe models >/dev/null 2>&1; do
  if ! docker exec "$CONTAINER" pgrep -f "vllm serve" >/dev/null 2>&1; then
    echo "vllm serve exited before it served $SERVED_NAME; the server log ends with:" >&2
    docker exec "$CONTAINER" tail -n 40 "$log" >&2 || true
    exit 1
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "vllm serve did not list $SERVED_NAME on /v1/models within ${TIMEOUT}s; the server log ends with:" >&2
    docker exec "$CONTAINER" tail -n 40 "$log" >&2 || true
    exit 1
  fi
  sleep 2
done
if ! completion="$(probe completion 2>&1)"; then
  echo "vllm serve lists $SERVED_NAME but a completion failed: $completion" >&2
  docker exec "$CONTAINER" tail -n 40 "$log" >&2 || true
  exit 1
fi
echo "completion $completion"
