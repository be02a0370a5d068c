#!/usr/bin/env bash
# Gives the running Prometheus its targets, its alert rules and the stack's key (infra/core/plan/
# monitoring.ts), then waits until it has loaded the rules and scraped every target up. Each file is
# written inside the container and renamed into place (Prometheus never reads half a file); the
# targets files are watched by Prometheus, the rules are read again on SIGHUP. The container and its
# data stay: a service added or removed changes the targets in place.
# Inputs: CONTAINER, PORT, FILE_PATHS and FILE_CONTENTS (bash arrays), KEY_FILE ("" without a key),
#         API_KEY (the stack's key, a secret), OWNER (Prometheus's uid, which alone reads the key),
#         ADDRESSES (bash array of "<job> <host:port>": every target), RULE_GROUPS, TIMEOUT (seconds).
set -euo pipefail
# step_answer: step-answer.sh, sent before this script.

write_file() { # path mode owner; the content on standard input
  docker exec -u 0 -i "$CONTAINER" sh -c \
    'mkdir -p "$(dirname "$1")" && cat > "$1.tmp" && chown "$3" "$1.tmp" && chmod "$2" "$1.tmp" && mv "$1.tmp" "$1"' \
    monitoring-config "$1" "$2" "$3"
}

for index in "${!FILE_PATHS[@]}"; do
  printf '%s' "${FILE_CONTENTS[$index]}" | write_file "${FILE_PATHS[$index]}" 0644 0:0
done
if [ -n "$KEY_FILE" ]; then
  printf '%s' "$API_KEY" | write_file "$KEY_FILE" 0400 "$OWNER:$OWNER"
fi
# The rules (and the configuration) read again; the targets files are read as they change.
docker kill --signal HUP "$CONTAINER" >/dev/null

set +e
answer="$(python3 - "$PORT" "$TIMEOUT" "$RULE_GROUPS" "${ADDRESSES[@]}" <<'PY'
import json, sys, time, urllib.request
port, timeout, groups, wanted = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sorted(sys.argv[4:])
base = f"http://127.0.0.1:{port}"
deadline = time.monotonic() + timeout
last = "no answer yet"

def get(path):
    with urllib.request.urlopen(base + path, timeout=5) as response:
        return json.load(response)["data"]

while True:
    try:
        loaded = len(get("/api/v1/rules").get("groups", []))
        targets = [t for t in get("/api/v1/targets?state=active")["activeTargets"] if t["labels"].get("job") != "prometheus"]
        have = sorted(f'{t["labels"]["job"]} {t["labels"]["instance"]}' for t in targets)
        down = [f'{t["labels"]["job"]} {t["labels"]["instance"]}: {t["health"]} {t.get("lastError", "")}'.strip() for t in targets if t["health"] != "up"]
        if loaded != groups:
            last = f"{loaded} rule groups loaded, not {groups}"
        elif have != wanted:
            last = f"the targets are {have}, not {wanted}"
        elif down:
            last = "not up: " + "; ".join(down)
        else:
            break
    except Exception as error:
        last = f"no answer from Prometheus on port {port}: {error}"
    if time.monotonic() >= deadline:
        print(f"Prometheus did not scrape every target up within {timeout:.0f}s: {last}")
        sys.exit(4)
    time.sleep(1)
for target in wanted:
    print(f"target {target} up")
PY
)"
status=$?
set -e
step_answer "$status" "$answer" "Prometheus's"
