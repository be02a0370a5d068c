#!/usr/bin/env bash
# Gives the gateway its routes: writes ROUTES_JSON to ROUTES_FILE inside its container (renamed into
# place, so the launcher never reads half a file), then waits until the router's workers are exactly
# those routes (the launcher applies the file within a second or two: new routes in, then old out).
# Inputs: CONTAINER, PORT, ROUTES_FILE, ROUTES_JSON, TIMEOUT (seconds).
set -euo pipefail
# step_answer: step-answer.sh, sent before this script.

printf '%s' "$ROUTES_JSON" | docker exec -i "$CONTAINER" sh -c 'cat > "$1.tmp" && mv "$1.tmp" "$1"' gateway-routes "$ROUTES_FILE"
set +e
answer="$(docker exec -i "$CONTAINER" python3 - "$PORT" "$TIMEOUT" "$ROUTES_JSON" <<'PY'
import json, sys, time, urllib.request
port, timeout, routes = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3])
wanted = sorted((route["url"], route["model"]) for route in routes)
deadline = time.monotonic() + timeout
have = None
while True:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/workers", timeout=5) as r:
            have = sorted((w.get("url"), w.get("model_id")) for w in json.load(r).get("workers", []))
    except Exception as error:
        have = f"no answer: {error}"
    if have == wanted:
        break
    if time.monotonic() >= deadline:
        print(f"the router's workers are {have}, not the routes {wanted}, after {timeout:.0f}s")
        sys.exit(4)
    time.sleep(0.2)
for url, model in wanted:
    print(f"route {model} {url}")
PY
)"
status=$?
set -e
step_answer "$status" "$answer" "the gateway's"
