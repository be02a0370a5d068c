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
# One Python process inside the container waits: it asks /v1/models every 0.2 s (a request, not a
# `docker exec` each time), watches that `vllm serve` still runs, then asks one completion.
# Exit 0: ready, the completion's JSON printed; 3: vllm serve is gone; 4: the timeout passed;
# 5: listed but the completion failed.
set +e
answer="$(docker exec -i --env VLLM_API_KEY "$CONTAINER" python3 - "$HOST" "$PORT" "$SERVED_NAME" "$TIMEOUT" <<'PY'
import json, os, subprocess, sys, time, urllib.request
host, port, model, timeout = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
headers = {"Content-Type": "application/json"}
if os.environ.get("VLLM_API_KEY"):
    headers["Authorization"] = "Bearer " + os.environ["VLLM_API_KEY"]
base = f"http://{host}:{port}/v1"
deadline = time.monotonic() + timeout

def listed():
    try:
        with urllib.request.urlopen(urllib.request.Request(base + "/models", headers=headers), timeout=5) as r:
            return model in [m["id"] for m in json.load(r)["data"]]
    except Exception:
        return False

while not listed():
    if subprocess.run(["pgrep", "-f", "vllm serve"], stdout=subprocess.DEVNULL).returncode != 0:
        sys.exit(3)
    if time.monotonic() >= deadline:
        sys.exit(4)
    time.sleep(0.2)
body = json.dumps({"model": model, "prompt": "Say hello.", "max_tokens": 16, "temperature": 0}).encode()
try:
    with urllib.request.urlopen(urllib.request.Request(base + "/completions", data=body, headers=headers), timeout=120) as r:
        print(json.dumps(json.load(r)))
except Exception as e:
    print(f"{type(e).__name__}: {e}")
    sys.exit(5)
PY
)"
status=$?
set -e
case "$status" in
  0)
    echo "completion $answer"
    ;;
  4)
    echo "vllm serve did not list $SERVED_NAME on /v1/models within ${TIMEOUT}s; the server log ends with:" >&2
    server_log >&2
    exit 1
    ;;
  5)
    echo "vllm serve lists $SERVED_NAME but a completion failed: $answer" >&2
    server_log >&2
    exit 1
    ;;
  *)
    # 3, or the container stopped under the exec.
    echo "vllm serve exited before it served $SERVED_NAME; the server log ends with:" >&2
    server_log >&2
    exit 1
    ;;
esac
