#!/usr/bin/env bash
# Waits until vLLM really serves: /v1/models lists the model and one completion answers. A log line
# is not readiness (a server can hang after "Application startup complete"). On a crash or a
# timeout, fails with the tail of the server log. Prints `completion <json>` on success.
# Inputs: CONTAINER (where `vllm serve` runs), HOST (where its API answers inside the container:
#         127.0.0.1, or the fabric address it alone listens on), PORT, SERVED_NAME, TIMEOUT (seconds), API_KEY (may be
#         empty), LOG_FILE (a log file inside the container; empty: the container's own log).
set -euo pipefail

server_log() {
  if [ -n "$LOG_FILE" ]; then
    docker exec "$CONTAINER" tail -n 40 "$LOG_FILE" || true
  else
    docker logs --tail 40 "$CONTAINER" 2>&1 || true
  fi
}

# The key by name only: docker takes its value from this environment, no command line shows it.
export VLLM_API_KEY="$API_KEY"
probe() {
  docker exec -i --env VLLM_API_KEY "$CONTAINER" python3 - "$HOST" "$PORT" "$SERVED_NAME" "$1" <<'PY'
import json, os, sys, urllib.request
host, port, model, what = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
headers = {"Content-Type": "application/json"}
if os.environ.get("VLLM_API_KEY"):
    headers["Authorization"] = "Bearer " + os.environ["VLLM_API_KEY"]
base = f"http://{host}:{port}/v1"
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
    server_log >&2
    exit 1
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "vllm serve did not list $SERVED_NAME on /v1/models within ${TIMEOUT}s; the server log ends with:" >&2
    server_log >&2
    exit 1
  fi
  sleep 1
done
if ! completion="$(probe completion 2>&1)"; then
  echo "vllm serve lists $SERVED_NAME but a completion failed: $completion" >&2
  server_log >&2
  exit 1
fi
echo "completion $completion"
