#!/usr/bin/env bash
# Downloads a model from the Hugging Face Hub into MODEL_PATH on this node (the first one), with the
# huggingface_hub inside the serving image (its snapshot_download, as vLLM itself would download),
# in a throw-away container on the node's network. The token travels in the environment (SECRET_ENV,
# from the program on standard input; `docker run --env HF_TOKEN` names it without a value), never
# in a command line. HF_ENDPOINT is honoured (HUB_ENDPOINT), HF_HUB_OFFLINE is forced off.
#
# Resumable: snapshot_download keeps every complete file with its commit in
# MODEL_PATH/.cache/huggingface/ and fetches only what is missing; a transfer broken mid-file is
# resumed with an HTTP Range request. After a complete download, MODEL_PATH/.cache/vllm-fleet/hub-download
# holds `<repo>@<revision>`: the next run with the same ones starts no container at all. Files an
# earlier revision downloaded that this one does not have are removed.
#
# Inputs: IMAGE, MODEL_PATH, REPO, REVISION, HUB_ENDPOINT ("": huggingface_hub's default),
#         SECRET_ENV (array: `HF_TOKEN=<token>`, or empty); runs after model-list.sh and docker-state.sh.
# Prints `hub-present|hub-downloaded <repo>@<revision> ...`, then the directory as the probe lists it
# (sections `model` and `model-config`).
set -euo pipefail

download="$(cat <<'PY'
import os, sys, time
repo, revision, target = sys.argv[1:4]
endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
token = bool(os.environ.get("HF_TOKEN"))
try:
    import httpx
    from huggingface_hub import snapshot_download
    from huggingface_hub import errors
except Exception as error:
    print(f"vllm-fleet: the serving image has no usable huggingface_hub ({type(error).__name__}: {error})", file=sys.stderr)
    sys.exit(3)

def refusal(error):
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    code = response.headers.get("X-Error-Code", "") if response is not None else ""
    said = (response.headers.get("X-Error-Message", "") if response is not None else "") or str(error).splitlines()[0]
    where = f"the Hub at {endpoint}"
    if status == 401 and not token:
        kind = "gated" if code == "GatedRepo" else "gated, private or missing"
        return (f"{where} refuses {repo} without a token (HTTP 401: {said}): the repo is {kind}; set the secret "
                f"vllm-fleet:hfToken to an access token that may read it (pulumi config set --secret hfToken <token>), "
                f"or check vllm-fleet:model.repo")
    if status == 401:
        return f"{where} refuses the token vllm-fleet:hfToken for {repo} (HTTP 401: {said}): give a valid token that may read it"
    if status == 403:
        return f"the token vllm-fleet:hfToken may not read {repo} (HTTP 403: {said}): request access on the repo's page, or use a token of an account that has it"
    if code == "RevisionNotFound" or isinstance(error, errors.RevisionNotFoundError):
        return f"{repo} has no revision {revision} on {where} (HTTP {status}) (config: vllm-fleet:model.revision)"
    if code == "RepoNotFound" or isinstance(error, errors.RepositoryNotFoundError):
        return f"{where} has no repo {repo} (HTTP {status}) (config: vllm-fleet:model.repo)"
    return None

started = time.time()
try:
    snapshot_download(repo_id=repo, revision=revision, local_dir=target)
except Exception as error:
    message = refusal(error) if hasattr(error, "response") else None
    if message is None:
        chain = error
        while chain is not None and not isinstance(chain, (httpx.ConnectError, httpx.TimeoutException)):
            chain = chain.__cause__ or chain.__context__
        if chain is not None:
            message = f"cannot reach the Hub at {endpoint} from this node ({type(chain).__name__}: {chain}) (config: vllm-fleet:model.hubEndpoint)"
        else:
            message = f"downloading {repo}@{revision} from {endpoint} failed: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    print(f"vllm-fleet: {message}", file=sys.stderr)
    sys.exit(1)

# Files of another revision: huggingface_hub records the commit of each file it wrote in
# .cache/huggingface/download/<file>.metadata (commit, etag, time), and rewrote it for each of this one.
meta_root = os.path.join(target, ".cache", "huggingface", "download")
removed = 0
for base, _dirs, names in os.walk(meta_root):
    for name in names:
        if not name.endswith(".metadata"):
            continue
        meta = os.path.join(base, name)
        with open(meta) as handle:
            commit = handle.readline().strip()
        if commit != revision:
            stale = os.path.join(target, os.path.relpath(meta, meta_root)[: -len(".metadata")])
            for path in (stale, meta):
                if os.path.isfile(path):
                    os.remove(path)
            removed += 1
print(f"vllm-fleet: snapshot complete removed={removed}")
PY
)"

marker="$MODEL_PATH/.cache/vllm-fleet/hub-download"
want="$REPO@$REVISION"
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$want" ]; then
  echo "hub-present $want"
else
  if ! mkdir -p "$MODEL_PATH" 2>/dev/null || [ ! -w "$MODEL_PATH" ]; then
    echo "cannot write the model directory $MODEL_PATH as $(id -un) on this node (config: vllm-fleet:model.path)" >&2
    exit 1
  fi
  rm -f "$marker"
  for pair in "${SECRET_ENV[@]}"; do
    export "$pair"
  done
  run_env=(--env HF_HUB_OFFLINE=0 --env HF_HUB_DISABLE_TELEMETRY=1 --env HF_HUB_DISABLE_PROGRESS_BARS=1 --env HOME=/tmp --env HF_HOME=/tmp/hf-home)
  if [ -n "$HUB_ENDPOINT" ]; then
    run_env+=(--env "HF_ENDPOINT=$HUB_ENDPOINT")
  fi
  if [ -n "${HF_TOKEN:-}" ]; then
    run_env+=(--env HF_TOKEN)
  fi
  # One of an earlier download cut short may be there, in any state (a removal of it under way
  # included): gone before this one takes its name.
  name="vllm-fleet-hub-download"
  remove_container "$name" >/dev/null
  trap 'docker rm -f "$name" >/dev/null 2>&1 || true' EXIT
  start=$(date +%s)
  status=0
  output="$(docker run --rm --name "$name" --network host --user "$(id -u):$(id -g)" \
    --volume "$MODEL_PATH:$MODEL_PATH" "${run_env[@]}" \
    --entrypoint python3 "$IMAGE" -c "$download" "$REPO" "$REVISION" "$MODEL_PATH" 2>&1)" || status=$?
  if [ "$status" -ne 0 ]; then
    message="$(printf '%s\n' "$output" | grep -m1 '^vllm-fleet: ' | sed 's/^vllm-fleet: //' || true)"
    if [ -z "$message" ]; then
      message="downloading $want failed (exit $status): $(printf '%s\n' "$output" | grep -v '^\s*$' | tail -n 5 | tr '\n' ' ')"
    fi
    echo "$message" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$marker")"
  printf '%s' "$want" >"$marker"
  echo "hub-downloaded $want seconds=$(($(date +%s) - start)) $(printf '%s\n' "$output" | grep -m1 '^vllm-fleet: snapshot complete' | sed 's/^vllm-fleet: snapshot complete //' || true)"
fi

echo "### model"
list_model_dir "$MODEL_PATH"
echo "### model-config"
if [ -f "$MODEL_PATH/config.json" ]; then
  head -c 262144 "$MODEL_PATH/config.json"
  echo
fi
