#!/usr/bin/env bash
# The live state of the fleet on one node, read at the start of every `pulumi preview`/`up` (after
# probe.sh, in the same read-only session): prints `### <section>` blocks that infra/observe.ts
# parses. Changes nothing on the host.
# Inputs: STACK (the stack whose containers to list), SERVING_CONTAINER (the serving container of
#         this node), SERVE_IN_CONTAINER (yes: `vllm serve` runs inside SERVING_CONTAINER, the ray
#         executor's head; else no), ENDPOINT (yes on the node that serves the API), PORT,
#         SERVED_NAME, WATCHDOG_CONTAINER, RAY_NODES (yes: also list the Ray nodes alive, by asking
#         the head; only `npm run status` does, it costs a Ray driver), FIREWALL_MARKER (the file
#         security.firewall's rules leave; empty: no firewall).
# The completion is asked where the running `vllm serve` listens (its --host) with the key it has
# (its VLLM_API_KEY), both read from /proc inside the container: the read needs no secret, and it
# tells whether what runs answers.
set -euo pipefail

section() { printf '### %s\n' "$1"; }

# One JSON object per container of this stack: what reconciliation needs to tell alive from dead.
section containers
ids="$(docker ps -aq --filter "label=vllm-fleet.stack=$STACK" 2>/dev/null || true)"
if [ -n "$ids" ]; then
  # shellcheck disable=SC2086 # the ids are words
  docker inspect --format '{"name":{{json .Name}},"id":{{json .Id}},"status":{{json .State.Status}},"running":{{.State.Running}},"restarting":{{.State.Restarting}},"exitCode":{{.State.ExitCode}},"restartCount":{{.RestartCount}},"startedAt":{{json .State.StartedAt}},"labels":{{json .Config.Labels}}}' $ids 2>/dev/null || true
fi

running() { [ "$(docker inspect --format '{{.State.Running}}' "$1" 2>/dev/null || true)" = "true" ]; }

if [ "$SERVE_IN_CONTAINER" = yes ]; then
  section serve
  if running "$SERVING_CONTAINER"; then
    if docker exec "$SERVING_CONTAINER" pgrep -f "vllm serve" >/dev/null 2>&1; then echo "process yes"; else echo "process no"; fi
    echo "token $(docker exec "$SERVING_CONTAINER" cat /tmp/vllm-fleet-serve.token 2>/dev/null || true)"
  else
    echo "process no"
  fi
fi

if [ "$ENDPOINT" = yes ]; then
  section endpoint
  if running "$SERVING_CONTAINER"; then
    # From inside the container, as the readiness gate asks.
    docker exec "$SERVING_CONTAINER" python3 -c '
import json, subprocess, sys, urllib.request, urllib.error
port, model = sys.argv[1], sys.argv[2]

def server():
    """The API key (VLLM_API_KEY) and the address (--host) of the oldest `vllm serve` here."""
    found = subprocess.run(["pgrep", "-o", "-f", "vllm" + " serve"], capture_output=True, text=True).stdout.split()
    key, host = "", "127.0.0.1"
    if not found:
        return key, host
    try:
        with open("/proc/%s/environ" % found[0], "rb") as f:
            for entry in f.read().split(b"\0"):
                if entry.startswith(b"VLLM_API_KEY="):
                    key = entry[len(b"VLLM_API_KEY="):].decode()
        with open("/proc/%s/cmdline" % found[0], "rb") as f:
            argv = f.read().decode().split("\0")
        if "--host" in argv[:-1] and argv[argv.index("--host") + 1] not in ("", "0.0.0.0"):
            host = argv[argv.index("--host") + 1]
    except OSError:
        pass
    return key, host

key, host = server()
headers = {"Content-Type": "application/json"}
if key:
    headers["Authorization"] = "Bearer " + key
base = "http://%s:%s" % (host, port)
try:
    with urllib.request.urlopen(base + "/health", timeout=5) as r:
        print("health", r.status)
except urllib.error.HTTPError as e:
    print("health", e.code)
except Exception as e:
    print("health none", type(e).__name__)
body = json.dumps({"model": model, "prompt": "Say hello.", "max_tokens": 4, "temperature": 0}).encode()
try:
    with urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", data=body, headers=headers), timeout=30) as r:
        json.load(r)["choices"]
    print("completion ok")
except urllib.error.HTTPError as e:
    print("completion fail HTTP", e.code)
except Exception as e:
    print("completion fail", type(e).__name__, str(e)[:120].replace("\n", " "))
' "$PORT" "$SERVED_NAME" 2>/dev/null || echo "completion fail no answer"
  else
    echo "health none container-down"
    echo "completion fail container $SERVING_CONTAINER is not running"
  fi
fi

if [ "$RAY_NODES" = yes ] && running "$SERVING_CONTAINER"; then
  section ray-nodes
  docker exec "$SERVING_CONTAINER" python3 -c '
import ray
ray.init(address="auto", logging_level="ERROR")
for n in ray.nodes():
    if n["Alive"]:
        print(n["NodeManagerAddress"], int(n["Resources"].get("GPU", 0)))
' 2>/dev/null || echo "unreachable"
fi

if [ -n "$FIREWALL_MARKER" ]; then
  # The revision the rules of security.firewall left (nothing: no rules, e.g. after a reboot).
  section firewall
  cat "$FIREWALL_MARKER" 2>/dev/null || true
fi

if [ -n "$WATCHDOG_CONTAINER" ] && running "$WATCHDOG_CONTAINER"; then
  section watchdog
  docker exec "$WATCHDOG_CONTAINER" cat /tmp/vllm-fleet-watchdog.json 2>/dev/null || true
  echo
fi
