#!/usr/bin/env bash
# Waits until Grafana answers on its node and shows the fleet's dashboard: /api/health says its
# database is ok, and the dashboard (provisioned from its container's files) is there for its admin
# user. Inputs: CONTAINER, PORT, DASHBOARD_UID, API_KEY (the admin password: the stack's key, a
# secret, read by Python from this environment), TIMEOUT (seconds).
set -euo pipefail
# step_answer: step-answer.sh, sent before this script.

export GRAFANA_PASSWORD="$API_KEY"
set +e
answer="$(python3 - "$PORT" "$DASHBOARD_UID" "$TIMEOUT" <<'PY'
import base64, json, os, sys, time, urllib.error, urllib.request
port, uid, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
base = f"http://127.0.0.1:{port}"
auth = "Basic " + base64.b64encode(("admin:" + os.environ["GRAFANA_PASSWORD"]).encode()).decode()
deadline = time.monotonic() + timeout
last = "no answer yet"
while True:
    try:
        with urllib.request.urlopen(base + "/api/health", timeout=5) as response:
            health = json.load(response)
        if health.get("database") != "ok":
            last = f"/api/health: {health}"
        else:
            request = urllib.request.Request(f"{base}/api/dashboards/uid/{uid}", headers={"Authorization": auth})
            with urllib.request.urlopen(request, timeout=5) as response:
                title = json.load(response)["dashboard"]["title"]
            print(f"grafana {health.get('version', '?')} dashboard {title}")
            break
    except urllib.error.HTTPError as error:
        last = f"HTTP {error.code} from {error.url}"
    except Exception as error:
        last = f"no answer from Grafana on port {port}: {error}"
    if time.monotonic() >= deadline:
        print(f"Grafana did not show the dashboard {uid} within {timeout:.0f}s: {last}")
        sys.exit(4)
    time.sleep(1)
PY
)"
status=$?
set -e
step_answer "$status" "$answer" "Grafana's"
