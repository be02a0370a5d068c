#!/usr/bin/env bash
# Prints the gateway's router's workers (its GET /workers JSON), asked inside the gateway's container
# on the loopback, where the router alone listens: read-only, for `npm run status` (tools/status.ts).
# Inputs: CONTAINER (the gateway's container), PORT (the router's).
set -euo pipefail
docker exec -i "$CONTAINER" python3 - "$PORT" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/workers", timeout=10) as r:
    sys.stdout.write(r.read().decode())
PY
