#!/usr/bin/env bash
# Starts one container from its docker run arguments (see infra/core/containerSpec.ts).
# Inputs: NAME (container name), RUN_ARGS (array: the arguments after `docker`),
#         SECRET_ENV (array of NAME=value: variables RUN_ARGS names without a value, `--env NAME`, so
#         that docker takes them from here and no command line shows them),
#         FILE_PATHS, FILE_CONTENTS (arrays, one entry a file: files the container carries from its
#         creation on; with any, the container is created from RUN_ARGS, the files are copied in,
#         then it is started, since `docker run` cannot write a file),
#         REMOVE_FIRST (array: containers to remove before starting, may be empty),
#         WATCH_SECONDS (how long the new container must stay up before this step succeeds: 0 when
#         the step that follows on this node watches it anyway, as the Ray join wait does).
# A stale container of the same name (an earlier failed run) is removed first, in whatever state it
# is, so a retry converges; so are the REMOVE_FIRST ones (the other executor's serving containers,
# which hold the GPU). Runs after docker-state.sh.
# Prints the new container's id; fails with the container's log tail if it does not stay up
# (running: a container restarting by its restart policy right after its start is not up).
set -euo pipefail

for name in "$NAME" "${REMOVE_FIRST[@]}"; do
  removed="$(remove_container "$name")"
  if [ "$name" != "$NAME" ] && [ "$removed" = "removed $name" ]; then
    echo "removed $name first (it held the GPU)"
  fi
done
for pair in "${SECRET_ENV[@]}"; do
  export "$pair"
done
if [ "${#FILE_PATHS[@]}" -eq 0 ]; then
  id="$(docker "${RUN_ARGS[@]}")"
else
  # `run --detach ...` made `create ...`; the files go in as one archive of the files alone (root's,
  # mode 0644; Docker makes the directories they lack, 0755) before the container first starts.
  id="$(docker create "${RUN_ARGS[@]:2}")"
  stage="$(mktemp -d)"
  trap 'rm -rf "$stage"' EXIT
  files=()
  for i in "${!FILE_PATHS[@]}"; do
    mkdir -p "$stage$(dirname "${FILE_PATHS[$i]}")"
    printf '%s' "${FILE_CONTENTS[$i]}" > "$stage${FILE_PATHS[$i]}"
    chmod 0644 "$stage${FILE_PATHS[$i]}"
    files+=("${FILE_PATHS[$i]#/}")
  done
  tar -C "$stage" --owner=0 --group=0 --numeric-owner --no-recursion -c "${files[@]}" | docker cp - "$NAME:/"
  docker start "$NAME" >/dev/null
fi
# Looked at right away, then every half second for WATCH_SECONDS.
for ((check = 0; ; check++)); do
  status="$(container_status "$NAME")" || exit 1
  if [ "$status" = gone ]; then
    echo "container $NAME is gone right after start (removed, its log with it)" >&2
    exit 1
  fi
  if [ "$status" != running ]; then
    how="is $status"
    [ "$status" != exited ] || how="exited"
    echo "container $NAME $how right after start; its last log lines:" >&2
    docker logs --tail 40 "$NAME" >&2 || true
    exit 1
  fi
  [ "$check" -ge "$((WATCH_SECONDS * 2))" ] && break
  sleep 0.5
done
echo "container-id $id"
