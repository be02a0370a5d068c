/**
 * A new build of an image, made on a simulated node from the image it has: the same layers but the
 * top one, which has the old top layer's files and one more file of random bytes (what a rebuild
 * whose last step changed looks like), under the same tag. The old image stays on the node untagged,
 * as it does after a `docker build` or `docker pull` under a tag. For the image copy's "an update
 * moves only what changed" (test/e2e/distribution.test.ts, the bench's --image-update).
 */
import { shQuote } from "../../components/shell";
import { SimNode, onNode } from "./simCluster";

/**
 * bash: `docker save` the image, rewrite its top layer and config (diff id, creation time), `docker
 * load` it back under the tag (through manifest.json, which both image stores read; index.json goes).
 * Prints `new-layer-bytes N`.
 */
const IMAGE_UPDATE = `set -euo pipefail
image="$1"; extra_bytes="$2"; dir="$(mktemp -d)"; trap 'rm -rf "$dir"' EXIT
docker save "$image" | tar -x -C "$dir"
python3 - "$dir" "$extra_bytes" <<'PY'
import hashlib, io, json, os, sys, tarfile
root, extra = sys.argv[1], int(sys.argv[2])
manifest = json.load(open(os.path.join(root, "manifest.json")))
entry = manifest[0]
config = json.load(open(os.path.join(root, entry["Config"])))
top = entry["Layers"][-1]
new_top = os.path.join(root, os.path.dirname(top), "new-top.tar")
added = "opt/vllm-fleet-update.bin"
with tarfile.open(os.path.join(root, top)) as old, tarfile.open(new_top, "w", format=tarfile.PAX_FORMAT) as layer:
    # The old top layer's files (but the file an earlier update added: a layer names a path once).
    for member in old.getmembers():
        if member.name.lstrip("./") != added:
            layer.addfile(member, old.extractfile(member) if member.isfile() else None)
    info = tarfile.TarInfo(added)
    info.size, info.mode, info.mtime = extra, 0o644, 1700000000
    layer.addfile(info, io.BytesIO(os.urandom(extra)))
digest = hashlib.sha256(open(new_top, "rb").read()).hexdigest()
name = os.path.join(os.path.dirname(top), digest if top.startswith("blobs/") else f"{digest}.tar")
os.replace(new_top, os.path.join(root, name))
config["rootfs"]["diff_ids"][-1] = "sha256:" + digest
config["created"] = "2026-01-01T00:00:00Z"
data = json.dumps(config).encode()
config_name = os.path.join(os.path.dirname(entry["Config"]), hashlib.sha256(data).hexdigest() + ("" if entry["Config"].startswith("blobs/") else ".json"))
open(os.path.join(root, config_name), "wb").write(data)
entry["Config"], entry["Layers"][-1] = config_name, name
entry.pop("LayerSources", None)
json.dump(manifest, open(os.path.join(root, "manifest.json"), "w"))
for stale in ("index.json", "oci-layout"):
    if os.path.exists(os.path.join(root, stale)):
        os.remove(os.path.join(root, stale))
print("new-layer-bytes", os.path.getsize(os.path.join(root, name)))
PY
old="$(docker image inspect --format '{{.Id}}' "$image")"
tar -C "$dir" -c . | docker load >/dev/null
[ "$(docker image inspect --format '{{.Id}}' "$image")" != "$old" ]`;

/** Makes the new build of `image` on `node` (its top layer plus `extraBytes` of random data); the new top layer's size in bytes. */
export function updateTopLayer(node: SimNode, image: string, extraBytes: number): number {
    const out = onNode(node, `bash -c ${shQuote(IMAGE_UPDATE)} _ ${shQuote(image)} ${extraBytes}`);
    return Number(/new-layer-bytes (\d+)/.exec(out)![1]);
}
