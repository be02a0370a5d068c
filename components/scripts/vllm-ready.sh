#!/usr/bin/env bash
# Waits until vLLM really serves: /v1/models lists the model and one completion answers. A log line
# is not readiness (a server can hang after "Application startup complete"). On a crash or a
# timeout, fails with the tail of the server log and the phase the start had reached. Prints
# `completion <json>` on success.
# While it waits, it says where the start is, on standard error: every PROGRESS_SECONDS it reads the
# server log's newest phase (vllm-phases.sh) and prints `progress: <phase>` when the phase changed,
# or `progress: still <phase> (<N>s)` when it has not for STILL_SECONDS (N: seconds in that phase;
# before any phase, `starting`). A line starting `progress: ` is shown while the step runs, by either
# runner (components/hostCommand.ts).
# Inputs: CONTAINER (where `vllm serve` runs), HOST (where its API answers inside the container:
#         127.0.0.1, or the fabric address it alone listens on), PORT, SERVED_NAME, TIMEOUT (seconds), API_KEY (may be
#         empty), LOG_FILE (a log file inside the container; empty: the container's own log),
#         PROGRESS_SECONDS, STILL_SECONDS; PHASE_PATTERNS and PHASE_TEXTS for vllm-phases.sh, which
#         runs before this.
set -euo pipefail

# server_log LINES: the last LINES lines of the server log (nothing when it cannot be read).
server_log() {
  if [ -n "$LOG_FILE" ]; then
    docker exec "$CONTAINER" tail -n "$1" "$LOG_FILE" || true
  else
    docker logs --tail "$1" "$CONTAINER" 2>&1 || true
  fi
}

# The progress lines, until the shell PARENT is gone or this loop is stopped. What it runs keeps the
# step's output open no longer than one read of the log (a step ends when its output does).
report_progress() {
  local parent=$1 phase last="" since=$SECONDS said=$SECONDS
  set +e
  while kill -0 "$parent" 2>/dev/null; do
    sleep "$PROGRESS_SECONDS" </dev/null >/dev/null 2>&1
    phase="$(server_log 200 </dev/null 2>/dev/null | newest_phase)"
    phase=${phase:-starting}
    if [ "$phase" != "$last" ]; then
      [ "$phase" = starting ] || echo "progress: $phase" >&2
      last=$phase since=$SECONDS said=$SECONDS
    elif ((SECONDS - said >= STILL_SECONDS)); then
      echo "progress: still $phase ($((SECONDS - since))s)" >&2
      said=$SECONDS
    fi
  done
}
report_progress "$BASHPID" &
progress_pid=$!

# The key by name only: docker takes its value from this environment, no command line shows it.
export VLLM_API_KEY="$API_KEY"
# One Python process inside the container waits: it asks /v1/models every 0.2 s (a request, not a
# `docker exec` each time), watches that `vllm serve` still runs, then asks one completion.
# Exit 0: ready, the completion's JSON printed; 3: vllm serve is gone; 4: the timeout passed;
# 5: listed but the completion failed; 6: with a key, a route outside /v1 answered without it
# (vllm-fleet's key check of every route, vllm_fleet_key.py, is not in force).
set +e
answer="$(docker exec -i --env VLLM_API_KEY "$CONTAINER" python3 - "$HOST" "$PORT" "$SERVED_NAME" "$TIMEOUT" <<'PY'
import json, os, subprocess, sys, time, urllib.error, urllib.request
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
if os.environ.get("VLLM_API_KEY"):
    # /version is outside vLLM's own check (/v1/*): without the key it must be refused too.
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/version", timeout=10) as r:
            print(f"GET /version answered {r.status} without the key")
            sys.exit(6)
    except urllib.error.HTTPError as e:
        if e.code != 401:
            print(f"GET /version answered {e.code} without the key, not 401")
            sys.exit(6)
PY
)"
status=$?
kill "$progress_pid" 2>/dev/null || true
wait "$progress_pid" 2>/dev/null || true
set -e
# Where the start got to, for a failure's first line.
reached() {
  local phase none="no phase of vLLM's start in its log"
  phase="$(server_log 200 2>/dev/null | newest_phase)"
  echo "the start reached: ${phase:-$none}"
}
case "$status" in
  0)
    echo "completion $answer"
    ;;
  4)
    echo "vllm serve did not list $SERVED_NAME on /v1/models within ${TIMEOUT}s ($(reached)); the server log ends with:" >&2
    server_log 40 >&2
    exit 1
    ;;
  5)
    echo "vllm serve lists $SERVED_NAME but a completion failed: $answer" >&2
    server_log 40 >&2
    exit 1
    ;;
  6)
    echo "vllm serve answers routes outside /v1 without the API key: ${answer##*$'\n'} (vllm-fleet's key check of every route, --middleware vllm_fleet_key.RequireKey, is not in force); the server log ends with:" >&2
    server_log 40 >&2
    exit 1
    ;;
  *)
    # 3, or the container stopped under the exec.
    echo "vllm serve exited before it served $SERVED_NAME ($(reached)); the server log ends with:" >&2
    server_log 40 >&2
    exit 1
    ;;
esac
