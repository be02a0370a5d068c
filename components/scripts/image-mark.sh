#!/usr/bin/env bash
# The marks image deliveries leave on a node (image.source pull or copy): one file per stack and
# image under the SSH user's home (infra/core/names.ts deliveryMark), holding `<revision> <image>`,
# the revision of the step that delivered it. A step writes its mark once the image is there
# (image-pull.sh, image-receive.sh); the read at the start of every run (live.sh) reports each mark
# with the image as the node has it now, so that a delivered image that is gone is delivered again
# while one still there keeps its step as it is (infra/core/observe.ts deliveryRevision).
# Defines:
#   mark_delivered MARK REVISION IMAGE   writes the mark (MARK relative to $HOME); a mark that cannot
#                                        be written is said on stderr, and the next run delivers again.
#   delivery_marks DIR                   for each mark under DIR (relative to $HOME): `mark <revision>
#                                        <image>`, then image_facts of that image (image-identity.sh).
set -euo pipefail

mark_delivered() {
  local file="$HOME/$1"
  if ! { mkdir -p "${file%/*}" && printf '%s %s\n' "$2" "$3" >"$file.new" && mv -f "$file.new" "$file"; } 2>/dev/null; then
    echo "cannot leave the delivery mark $file (the next pulumi up delivers $3 again)" >&2
  fi
}

delivery_marks() {
  local file revision image
  for file in "$HOME/$1"/*; do
    [ -f "$file" ] || continue
    case "$file" in *.new) continue ;; esac
    revision="" image=""
    read -r revision image <"$file" || true
    [ -n "$revision" ] && [ -n "$image" ] || continue
    echo "mark $revision $image"
    image_facts "$image"
  done
}
