#!/usr/bin/env bash
# Sending side of an image copy, on the first node: `docker save` streamed over the fabric to the
# receiver of image-receive.sh on the target (fabric-stream.py), with the per-copy secret, without
# the layers the target said it has (image-layers.py: an update moves only its new layers). One save
# serves every node copied to at once, each sender thinning it for its own target: the first sender starts `docker save` into a file here
# (detached, so it outlives that sender's session), every sender streams the file as it grows
# (tail --pid), and the last one out removes it (and stops a save nobody reads any more). A save
# that failed, or whose saver died without a word (a reboot), is started again. Refuses when this
# node's image is no longer the one the run read, by content identity (image-identity.sh): the
# target would get other content.
# Inputs: IMAGE, WANT_IDENTITY, TARGET_IP (the receiver's fabric address), PORT, SECRET,
# FABRIC_STREAM, IMAGE_LAYERS (image-layers.py's text); runs after image-identity.sh.
set -euo pipefail

have="$(image_identity "$IMAGE" 2>/dev/null || true)"
if [ "$have" != "$WANT_IDENTITY" ]; then
  echo "$IMAGE here is ${have:-missing}, not $WANT_IDENTITY as read at the start of this run (content identities)" >&2
  exit 1
fi
# Docker 26.1's containerd image store: a pull that finds some of an image's layers unpacked already
# (an earlier build's) does not fetch their blobs. Such an image is inspected whole (so its content
# identity) but not listed (`docker image ls`: its content is incomplete), and its `docker save`
# holds its manifest and no config nor layer, which no node can load. Refused; the receiver is told
# (a stream that ends without its end mark) so that it stops waiting for one.
# The fix is to remove every image holding those unpacked layers, and images pulled that way are not
# listed either: the refusal names those sharing its bottom layer that it can see (by containerd's
# own list where it may read it, as root; else by Docker's) and says where the rest are listed.
sharing_images() {
  local names="" name bottom
  names="$(ctr --namespace moby images ls --quiet 2>/dev/null || true)"
  [ -n "$names" ] || names="$(docker image ls --format '{{.Repository}}:{{.Tag}}' | grep -vF '<none>' || true)"
  bottom="$(docker image inspect --format '{{index .RootFS.Layers 0}}' "$IMAGE")"
  for name in $names; do
    if [ "$name" != "$IMAGE" ] && [ "$(docker image inspect --format '{{index .RootFS.Layers 0}}' "$name" 2>/dev/null)" = "$bottom" ]; then
      printf '%s ' "$name"
    fi
  done
  return 0
}
id="$(docker image inspect --format '{{.Id}}' "$IMAGE")"
if ! docker image ls --all --quiet --no-trunc | grep -qxF "$id"; then
  shared="$(sharing_images)"
  refusal="$IMAGE here lacks blobs (docker image ls omits it; its docker save would hold no layers): its pull skipped blobs of layers already unpacked; the fix is on this node: remove it and every image sharing its bottom layer, then pull it again (or set vllm-fleet:image.source to pull); those here: ${shared:-none listed}and any pulled the same way (sudo ctr -n moby images ls lists them)"
  FLEET_SECRET="$SECRET" python3 -c "$FABRIC_STREAM" send "$TARGET_IP" "$PORT" -- false >/dev/null 2>&1 || true
  echo "$refusal" >&2
  exit 1
fi
# The saved image's ordered layer diff ids (what image-layers.py may leave out).
read -r -a diff_ids <<<"$(docker image inspect --format '{{range .RootFS.Layers}}{{.}} {{end}}' "$IMAGE")"
dir="${TMPDIR:-/var/tmp}/vllm-fleet-images-$(id -u)"
mkdir -p "$dir"
chmod 700 "$dir"
base="$dir/${WANT_IDENTITY#sha256:}"
# Two locks: `lock`, held briefly by whoever decides (start a save, remove it); `readers`, held
# shared by every sender while it streams, so that a sender can tell it is the last one out.
exec 8>"$base.lock" 9>"$base.readers"
flock -x 8
if [ -s "$base.pid" ]; then
  saved="$(cat "$base.status" 2>/dev/null || true)"
  if { [ -n "$saved" ] && [ "$saved" != 0 ]; } || { [ -z "$saved" ] && ! kill -0 "$(cat "$base.pid")" 2>/dev/null; }; then
    rm -f "$base.tar" "$base.pid" "$base.status" "$base.err"
  fi
fi
if [ ! -s "$base.pid" ]; then
  : >"$base.tar"
  # In a session of its own (its pid is its process group's), holding none of the locks; it writes
  # that pid itself.
  setsid bash -c 'echo "$$" >"$2.pid.new" && mv "$2.pid.new" "$2.pid"; docker save "$1" >"$2.tar" 2>"$2.err"; echo "$?" >"$2.status"' \
    _ "$IMAGE" "$base" </dev/null >/dev/null 2>&1 8>&- 9>&- &
  for _ in $(seq 1 100); do
    [ -s "$base.pid" ] && break
    sleep 0.05
  done
  [ -s "$base.pid" ] || { echo "docker save of $IMAGE did not start" >&2; exit 1; }
  echo "saving $IMAGE (once for every node it is copied to now)"
else
  echo "streaming the save of $IMAGE that is there or under way"
fi
flock -s 9
flock -u 8
saver="$(cat "$base.pid")"
# The stream: the file from its first byte, following it until the saver ends, less the layers the
# target offered (the receiver's note); then the save's own verdict (a failed save must not reach
# the target as a whole image: no end mark is sent).
offer="$(mktemp)"
# shellcheck disable=SC2016
follow='python3 -c "$1" "$3.tar" "$2" "$4" -- "${@:5}" 2>"$4.left" || { cat "$4.left" >&2; exit 1; }
[ "$(cat "$3.status" 2>/dev/null)" = 0 ] || { echo "docker save failed: $(cat "$3.err" 2>/dev/null)" >&2; exit 1; }'
status=0
FLEET_SECRET="$SECRET" python3 -c "$FABRIC_STREAM" send "$TARGET_IP" "$PORT" --note-out "$offer" -- bash -c "$follow" _ "$IMAGE_LAYERS" "$saver" "$base" "$offer" "${diff_ids[@]}" || status=$?
# What was left out (`layers-left-out count=K bytes=N of=L`), in the step's output.
cat "$offer.left" 2>/dev/null || true
rm -f "$offer" "$offer.left"
# The last sender out removes the save (stopping it when it still runs: nobody reads it).
flock -u 9
flock -x 8
if flock -xn 9; then
  kill -- "-$saver" 2>/dev/null || true
  rm -f "$base.tar" "$base.pid" "$base.status" "$base.err"
fi
exit "$status"
