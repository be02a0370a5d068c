#!/usr/bin/env bash
# Waits until the gateway serves every route: its /v1/models lists each model and a completion of
# each model through it answers (HTTP 200, with choices). Prints `route <model> <json>` per model.
# Inputs: CONTAINER (the gateway's container), PORT, MODELS (bash array), TIMEOUT (seconds), API_KEY
#         (may be empty).
set -euo pipefail
# step_answer: step-answer.sh, sent before this script.

# The key by name only: docker takes its value from this environment, no command line shows it.
export VLLM_API_KEY="$API_KEY"
set +e
answer="$(docker exec -i --env VLLM_API_KEY "$CONTAINER" python3 - "$PORT" "$TIMEOUT" "${MODELS[@]}" <<'PY'
import json, os, sys, time, urllib.error, urllib.request
port, timeout, models = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
headers = {"Content-Type": "application/json"}
if os.environ.get("VLLM_API_KEY"):
    headers["Authorization"] = "Bearer " + os.environ["VLLM_API_KEY"]
base = f"http://127.0.0.1:{port}/v1"
deadline = time.monotonic() + timeout
last = "no answer yet"

def listed():
    with urllib.request.urlopen(urllib.request.Request(base + "/models", headers=headers), timeout=5) as r:
        body = json.load(r)
    # vllm-router's IGW mode lists {"models": [...]}; an OpenAI list has {"data": [{"id": ...}]}.
    return set(body.get("models", [])) | {m.get("id") for m in body.get("data", [])}

def completion(model):
    body = json.dumps({"model": model, "prompt": "Say hello.", "max_tokens": 16, "temperature": 0}).encode()
    with urllib.request.urlopen(urllib.request.Request(base + "/completions", data=body, headers=headers), timeout=120) as r:
        answer = json.load(r)
    if not answer.get("choices"):
        raise ValueError("no choices in " + json.dumps(answer)[:200])
    return answer

pending = list(models)
answers = {}
while pending:
    try:
        missing = [m for m in pending if m not in listed()]
        if missing:
            last = "not listed by /v1/models: " + ", ".join(missing)
        else:
            for model in list(pending):
                answers[model] = completion(model)
                pending.remove(model)
    except urllib.error.HTTPError as error:
        last = f"HTTP {error.code}: {error.read()[:200].decode(errors='replace')}"
    except Exception as error:
        last = str(error)
    if pending and time.monotonic() >= deadline:
        print(f"the gateway did not serve {', '.join(pending)} within {timeout:.0f}s: {last}")
        sys.exit(4)
    if pending:
        time.sleep(0.5)
for model in models:
    print("route " + model + " " + json.dumps(answers[model]))
PY
)"
status=$?
set -e
step_answer "$status" "$answer" "the gateway's"
