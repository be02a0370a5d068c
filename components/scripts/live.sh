#!/usr/bin/env bash
# The live state of the fleet on one node, read at the start of every `pulumi preview`/`up` (after
# probe.sh, in the same read-only session): prints `### <section>` blocks that infra/core/observe.ts
# parses. Changes nothing on the host.
# Inputs: STACK (the stack whose containers to list), OWN_NAMES (array: the container names this
#         stack uses on the node, so that another's container by one of them is seen), SERVING_CONTAINER (the serving container of
#         this node), SERVE_IN_CONTAINER (yes: `vllm serve` runs inside SERVING_CONTAINER, the ray
#         executor's head; else no), ENDPOINT (yes on the node that serves the API), PORT,
#         SERVED_NAME, WATCHDOG_CONTAINER, RAY_NODES (yes: also list the Ray nodes alive, by asking
#         the head; only `npm run status` does, it costs a Ray driver), FIREWALL_MARKER (the file
#         security.firewall's rules leave; empty: no firewall), DELIVERY_MARKS (the folder, under
#         the home, of the marks this stack's image deliveries left: image-mark.sh).
# The completion is asked where the running `vllm serve` listens (its --host) with the key it has
# (its VLLM_API_KEY), both read from /proc inside the container: the read needs no secret, and it
# tells whether what runs answers.
set -euo pipefail

section() { printf '### %s\n' "$1"; }

# Every container of the node, once: its id, name and owning stack (the label vllm-fleet.stack).
listing="$(docker ps -a --no-trunc --format '{{.ID}}\t{{.Names}}\t{{.Label "vllm-fleet.stack"}}\t{{.Status}}' 2>/dev/null || true)"

# One JSON object per container of this stack: what reconciliation needs to tell alive from dead.
section containers
ids="$(awk -F '\t' -v stack="$STACK" '$3 == stack { print $1 }' <<<"$listing")"
containers=""
if [ -n "$ids" ]; then
  # shellcheck disable=SC2086 # the ids are words
  containers="$(docker inspect --format '{"name":{{json .Name}},"id":{{json .Id}},"status":{{json .State.Status}},"running":{{.State.Running}},"restarting":{{.State.Restarting}},"exitCode":{{.State.ExitCode}},"restartCount":{{.RestartCount}},"startedAt":{{json .State.StartedAt}},"labels":{{json .Config.Labels}},"image":{{json .Config.Image}},"args":{{json .Args}}}' $ids 2>/dev/null || true)"
  printf '%s\n' "$containers"
fi

# What `vllm serve` runs with in each running Ray head of this stack on the node but this service's
# (whose head the exec below reads): the arguments the last start left (vllm-lifecycle.sh), one line
# each, `<container>\t<JSON list>`. A service of the stack that left the config is known by them (its
# served name, port and memory share: infra/core/plan/swaps.ts); mp ranks carry theirs as `args`.
section serve-args
while IFS= read -r line; do
  case "$line" in
    *'"status":"running",'*'"vllm-fleet.role":"ray-head"'*) ;;
    *) continue ;;
  esac
  head_name="$(sed -n 's/^{"name":"\/\([^"]*\)".*/\1/p' <<<"$line")"
  if [ -n "$head_name" ] && [ "$head_name" != "$SERVING_CONTAINER" ]; then
    printf '%s\t%s\n' "$head_name" "$(docker exec "$head_name" cat /tmp/vllm-fleet-serve.args 2>/dev/null | tr -d '\n' || true)"
  fi
done <<<"$containers"

# Containers this stack does not own but would touch: another stack's (by its label), or one
# without the label under a name this stack uses. One line each: name, owning stack, status.
section foreign
awk -F '\t' -v stack="$STACK" -v names=" ${OWN_NAMES[*]} " '
  ($3 != "" && $3 != stack) || ($3 == "" && index(names, " " $2 " ") > 0) { print $2 "\t" $3 "\t" $4 }' <<<"$listing"

# Whether this stack's container $1 runs, from the list just read (no further call to Docker); a
# paused one does not (Docker counts it running, but nothing in it answers, nor takes an exec).
running() { grep -q "^{\"name\":\"/$1\",\"id\":\"[^\"]*\",\"status\":\"running\"," <<<"$containers"; }

# The watchdog's recent events are read meanwhile (a `docker exec` costs tens of milliseconds).
watchdog_file=""
if [ -n "$WATCHDOG_CONTAINER" ] && running "$WATCHDOG_CONTAINER"; then
  watchdog_file="$(mktemp)"
  docker exec "$WATCHDOG_CONTAINER" cat /tmp/vllm-fleet-watchdog.json >"$watchdog_file" 2>/dev/null &
  watchdog_pid=$!
fi

# `vllm serve` (ray executor's head) and the endpoint, in one `docker exec` of the serving container.
if [ "$SERVE_IN_CONTAINER" = yes ] || [ "$ENDPOINT" = yes ]; then
  serving=""
  if running "$SERVING_CONTAINER"; then
    # From inside the container, as the readiness gate asks.
    serving="$(docker exec "$SERVING_CONTAINER" python3 -c '
import json, subprocess, sys, urllib.request, urllib.error
serve_section, endpoint_section, port, model = sys.argv[1:5]
# Split, so that the pattern does not match this very process (its command line holds this text).
found = subprocess.run(["pgrep", "-o", "-f", "vllm" + " serve"], capture_output=True, text=True).stdout.split()

if serve_section == "yes":
    print("### serve")
    print("process", "yes" if found else "no")
    try:
        with open("/tmp/vllm-fleet-serve.token") as f:
            print("token", f.read().strip())
    except OSError:
        print("token ")
    try:
        with open("/tmp/vllm-fleet-serve.args") as f:
            print("args", f.read().replace("\n", ""))
    except OSError:
        pass
if endpoint_section != "yes":
    sys.exit(0)
print("### endpoint", flush=True)

def server():
    """The API key (VLLM_API_KEY) and the address (--host) of the oldest server found."""
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
' "$SERVE_IN_CONTAINER" "$ENDPOINT" "$PORT" "$SERVED_NAME" 2>/dev/null || true)"
  fi
  # A `docker exec` that could not start prints its own failure (e.g. the runtime's "OCI runtime
  # exec failed", on stdout) and none of the sections: that is no answer, with the reason kept.
  exec_failure=""
  if [ -n "$serving" ] && ! grep -q '^### ' <<<"$serving"; then
    exec_failure=" (docker exec: $(head -n 1 <<<"$serving" | cut -c1-160))"
    serving=""
  fi
  if [ -n "$serving" ]; then
    printf '%s\n' "$serving"
    # Ended before or after its endpoint header (the exec cut short): the answer is missing.
    if [ "$ENDPOINT" = yes ] && ! grep -q '^### endpoint$' <<<"$serving"; then section endpoint; fi
    if [ "$ENDPOINT" = yes ] && ! grep -q '^completion ' <<<"$serving"; then echo "completion fail no answer"; fi
  else
    if [ "$SERVE_IN_CONTAINER" = yes ]; then section serve; echo "process no"; fi
    if [ "$ENDPOINT" = yes ]; then
      section endpoint
      if running "$SERVING_CONTAINER"; then
        echo "completion fail no answer$exec_failure"
      else
        echo "health none container-down"
        echo "completion fail container $SERVING_CONTAINER is not running"
      fi
    fi
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

if [ -n "$DELIVERY_MARKS" ]; then
  # Each image this stack delivered here, by the mark its step left, with the image as it is now
  # (gone with `docker rmi`, a wiped store, a new node: no identity).
  section delivered
  delivery_marks "$DELIVERY_MARKS"
fi

if [ -n "$watchdog_file" ]; then
  wait "$watchdog_pid" || true
  section watchdog
  cat "$watchdog_file"
  rm -f "$watchdog_file"
  echo
fi
