#!/usr/bin/env python3
"""
The image copy's archive, thinned for one target (image.source copy): `docker save` of the image,
read from the file the save writes as it grows, written to standard output without the layer files
the target has already, so that an update moves only its new layers. This file travels whole to a
node (its text is the program a node runs), so it is one file.

  image-layers.py ARCHIVE SAVER_PID OFFER -- DIFF_ID...
      ARCHIVE: the tar `docker save` writes (followed while the process SAVER_PID lives, like
      `tail --pid -f`; 0: the file is whole). OFFER: what the target said it has (image-receive.sh): a line
      `store classic` or `store containerd`, then one line `image DIFF_ID...` per image there (its
      ordered layer diff ids). DIFF_ID...: the saved image's ordered layer diff ids.
      Prints the archive, less the layers it may leave out, and on standard error a last line
      `layers-left-out count=K bytes=N of=L`.

Which layers may be left out. Docker's classic store loads an archive by untarring it whole, then,
layer by layer, takes the layer from its store when a layer of that chain id is there and opens the
layer's file only when not (moby/moby image/tarexport/load.go, `Load`: `l.lss.Get(r.ChainID())`
before `l.loadLayer(...)`; so in v20.10.24 and v26.1.5, and in master's
daemon/internal/image/tarexport/load.go). A layer whose chain id (its diff id and every diff id
below it) is on the target is one of an image there, so a layer is left out when every place it
takes in the saved image has its chain on the target. The containerd image store (Docker 25+ with
the containerd snapshotter) imports the archive into containerd's content store
(v26.1.5 daemon/containerd/image_exporter.go `LoadImage`: `Import` with `WithSkipMissing`, then
unpack): a layer left out loads without an error when its snapshot is there, but an image whose
manifest names a blob the content store lacks is not listed (image_list.go, `CheckContentAvailable`),
and tried with Docker 26.1, its `docker save` came out truncated, while its `docker image inspect`,
and so its content identity, looked whole. The blobs there are named by the digest of what the
source stored (compressed or not), which the target's `docker image inspect` does not show: to a
target on that store the whole archive goes.

How a layer file is known in the stream (the archive's index, manifest.json, comes after the
layers). Docker 25+ writes the OCI layout, a layer as `blobs/sha256/<digest>`, in the order of the
names (containerd's images/archive exporter sorts its records by name: blobs by digest, then
index.json, manifest.json, oci-layout). A layer the source keeps uncompressed (the classic store, or
an image loaded into the containerd store) has its diff id for digest. A layer pulled into the
containerd store is kept as the registry sent it, gzip-compressed, and named by that digest: while
some layer that may be left out has not been met yet, such a blob is decompressed and hashed once it
is whole in ARCHIVE (sha256 of the uncompressed tar is its diff id), before it is sent or left out.
Mapping it through manifest.json and the config's diff ids would have to wait for the whole save
(those files come last), and the target's receiver gives up after 120 s without a byte. A blob that
is not gzip (a config, a manifest, a zstd layer: the standard library has no zstd) is sent. Docker
before 25 writes `<v1 id>/layer.tar`, named by an id that is not the diff id: the file is hashed
likewise. Everything else passes unchanged.
Standard library only.
"""
import hashlib
import os
import re
import sys
import time
import zlib

BLOCK = 512
CHUNK = 1 << 20
OCI_BLOB = re.compile(r"^blobs/sha256/([0-9a-f]{64})$")
LEGACY_LAYER = re.compile(r"^[0-9a-f]{64}/layer\.tar$")
# Extended headers that describe the entry after them (POSIX pax, GNU long names); a pax global
# header ("g") describes every entry after it and always passes.
EXTENDED = {b"x", b"L", b"K"}
GZIP_MAGIC = b"\x1f\x8b"


def chain_ids(diff_ids):
    """The chain id of each prefix of an image's layers (the OCI image spec's ChainID)."""
    chains = []
    for diff_id in diff_ids:
        chain = diff_id if not chains else "sha256:" + hashlib.sha256(f"{chains[-1]} {diff_id}".encode()).hexdigest()
        chains.append(chain)
    return chains


def parse_offer(text):
    """The target's store ('classic', 'containerd' or None when it said nothing) and its images' layer lists."""
    store, images = None, []
    for line in text.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "store":
            store = rest.strip()
        elif word == "image":
            images.append(rest.split())
    return store, images


def layers_to_leave_out(source_diff_ids, offer_text):
    """The diff ids of the saved image whose every place has its chain on the target (classic store only)."""
    store, images = parse_offer(offer_text)
    if store != "classic":
        return set()
    present = {chain for layers in images for chain in chain_ids(layers)}
    keep, leave = set(), set()
    for diff_id, chain in zip(source_diff_ids, chain_ids(source_diff_ids)):
        (leave if chain in present else keep).add(diff_id)
    return leave - keep


class Growing:
    """A file read as another process writes it: a read waits for more while that process lives."""

    def __init__(self, path, writer_pid):
        self.fd = os.open(path, os.O_RDONLY)
        self.writer_pid = writer_pid
        self.offset = 0

    def writer_alive(self):
        if self.writer_pid <= 0:
            return False
        try:
            os.kill(self.writer_pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True

    def wait_for(self, end):
        """Waits until the file holds `end` bytes; False when its writer ended short of them."""
        while os.fstat(self.fd).st_size < end:
            if not self.writer_alive():
                return os.fstat(self.fd).st_size >= end
            time.sleep(0.05)
        return True

    def read(self, count):
        """Exactly `count` bytes from the current offset, or fewer when the writer ended."""
        self.wait_for(self.offset + count)
        data = os.pread(self.fd, count, self.offset)
        self.offset += len(data)
        return data

    def copy(self, start, count, out):
        """Writes `count` bytes of the file from `start` to `out` (waiting for them); the count written."""
        done = 0
        while done < count:
            want = min(CHUNK, count - done)
            if not self.wait_for(start + done + want):
                want = os.fstat(self.fd).st_size - (start + done)
                if want <= 0:
                    return done
            data = os.pread(self.fd, want, start + done)
            write_all(out, data)
            done += len(data)
        return done

    def sha256(self, start, count):
        """sha256 of `count` bytes from `start` (waiting for them), or None when the writer ended short."""
        if not self.wait_for(start + count):
            return None
        digest = hashlib.sha256()
        done = 0
        while done < count:
            data = os.pread(self.fd, min(CHUNK, count - done), start + done)
            if not data:
                return None
            digest.update(data)
            done += len(data)
        return "sha256:" + digest.hexdigest()


    def gunzip_sha256(self, start, count):
        """sha256 of the gzip stream's uncompressed bytes in `count` bytes from `start` (waiting for
        them; several gzip members are one stream), or None when they are not gzip or the writer
        ended short of them."""
        if count < len(GZIP_MAGIC) or not self.wait_for(start + count) or os.pread(self.fd, 2, start) != GZIP_MAGIC:
            return None
        digest = hashlib.sha256()
        inflate = zlib.decompressobj(wbits=31)
        done = 0
        try:
            while done < count:
                data = os.pread(self.fd, min(CHUNK, count - done), start + done)
                if not data:
                    return None
                done += len(data)
                while data:
                    digest.update(inflate.decompress(data))
                    data = inflate.unused_data if inflate.eof else b""
                    if inflate.eof:
                        inflate = zlib.decompressobj(wbits=31)
            digest.update(inflate.flush())
        except zlib.error:
            return None
        return "sha256:" + digest.hexdigest()


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def octal(field):
    """A tar number field: octal text, or base-256 when its first byte has the high bit."""
    if field[0] & 0x80:
        return int.from_bytes(field[1:], "big")
    text = field.split(b"\0", 1)[0].strip()
    return int(text, 8) if text else 0


def header_name(block):
    name = block[0:100].split(b"\0", 1)[0]
    if block[257:262] == b"ustar":
        prefix = block[345:500].split(b"\0", 1)[0]
        if prefix:
            name = prefix + b"/" + name
    return name.decode("utf-8", "surrogateescape")


def pax_path(data):
    """The `path` record of a pax extended header, if any."""
    for record in data.split(b"\n"):
        _, _, field = record.partition(b" ")
        key, _, value = field.partition(b"=")
        if key == b"path":
            return value.decode("utf-8", "surrogateescape")
    return None


def padded(size):
    return (size + BLOCK - 1) // BLOCK * BLOCK


def thin(archive, out, leave_out, diff_ids=()):
    """Copies the tar in `archive` to `out` without the layer files whose diff id is in `leave_out`
    (`diff_ids`: every layer's, which an uncompressed blob is named by). Returns (layers left out,
    their bytes)."""
    left_out, left_bytes = 0, 0
    known = set(diff_ids) | set(leave_out)
    unmet = set(leave_out)  # the layers that may be left out, not met yet
    pending = []  # extended headers (start, length) that belong to the next entry
    long_name = None
    while True:
        start = archive.offset
        block = archive.read(BLOCK)
        if len(block) < BLOCK:
            # The writer ended inside the archive: pass on what there is; the save's status judges it.
            for pending_start, pending_length in pending:
                archive.copy(pending_start, pending_length, out)
            write_all(out, block)
            return left_out, left_bytes
        if block == bytes(BLOCK):
            # The end of the archive: it and whatever follows pass unchanged.
            write_all(out, block)
            rest = archive.offset
            while True:
                copied = archive.copy(rest, CHUNK, out)
                rest += copied
                if copied < CHUNK:
                    return left_out, left_bytes
        size = octal(block[124:136])
        kind = block[156:157]
        data_start = archive.offset
        archive.offset = data_start + padded(size)
        if kind in EXTENDED:
            if kind in (b"x", b"L"):
                data = os.pread(archive.fd, size, data_start) if archive.wait_for(data_start + size) else b""
                named = pax_path(data) if kind == b"x" else data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
                long_name = named or long_name
            pending.append((start, archive.offset - start))
            continue
        name = long_name or header_name(block)
        long_name = None
        diff_id = None
        if kind in (b"0", b"\0") and leave_out:
            blob = OCI_BLOB.match(name)
            if blob:
                diff_id = "sha256:" + blob.group(1)
                if diff_id not in known:
                    # Compressed (a layer pulled into the containerd store), or no layer at all.
                    diff_id = archive.gunzip_sha256(data_start, size) if unmet else None
            elif LEGACY_LAYER.match(name):
                diff_id = archive.sha256(data_start, size)
        if diff_id in leave_out:
            unmet.discard(diff_id)
            left_out += 1
            left_bytes += size
            pending = []
            continue
        for pending_start, pending_length in pending:
            archive.copy(pending_start, pending_length, out)
        pending = []
        archive.copy(start, archive.offset - start, out)


def main(argv):
    if len(argv) < 4 or argv[3] != "--":
        sys.stderr.write("usage: image-layers.py ARCHIVE SAVER_PID OFFER -- DIFF_ID...\n")
        return 2
    path, saver, offer_path, diff_ids = argv[0], int(argv[1]), argv[2], argv[4:]
    with open(offer_path, encoding="utf-8") as offer:
        leave_out = layers_to_leave_out(diff_ids, offer.read())
    left_out, left_bytes = thin(Growing(path, saver), sys.stdout.fileno(), leave_out, diff_ids)
    sys.stderr.write(f"layers-left-out count={left_out} bytes={left_bytes} of={len(diff_ids)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
