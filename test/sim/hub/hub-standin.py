#!/usr/bin/env python3
# STAND-IN for the Hugging Face Hub: the hub stand-in. A tiny HTTP server with the parts of the Hub's
# API that huggingface_hub's snapshot_download calls (modelled on huggingface_hub 1.33.0, the version
# in workload/requirements.lock: _snapshot_download.py, file_download.py, hf_api.py, utils/_http.py):
#
#   GET  /api/models/{owner}/{name}/revision/{rev}     repo_info: {"id", "sha", "siblings": [{"rfilename"}], ...}
#                                                      (huggingface_hub calls it for a branch or tag only)
#   GET  /api/models/{owner}/{name}/tree/{rev}[/{dir}] list_repo_tree: [{"type": "file", "path", "size", "oid",
#                                                      "lfs": {"oid": <sha256>, "size", "pointerSize"}}]
#   HEAD /{owner}/{name}/resolve/{rev}/{file}          get_hf_file_metadata: X-Repo-Commit, ETag (the git blob id),
#                                                      X-Linked-Etag + X-Linked-Size for LFS files (the sha256),
#                                                      Content-Length, Accept-Ranges
#   GET  /{owner}/{name}/resolve/{rev}/{file}          http_get: the bytes; `Range: bytes=N-` answers 206 with
#                                                      Content-Range (how huggingface_hub resumes a broken transfer)
#
# Errors as the Hub sends them (hf_raise_for_status reads X-Error-Code and X-Error-Message): a gated
# repo without a token: 401 `GatedRepo`; a token that is not the repo's: 401 "Invalid credentials in
# Authorization header"; an unknown repo: 401 `RepoNotFound` (the Hub does not say whether a private
# repo exists); an unknown revision: 404 `RevisionNotFound`; an unknown file: 404 `EntryNotFound`.
#
# Simpler than the real Hub: LFS files are served by the Hub itself (the real one redirects to a CDN
# host with the same X-Linked-* headers); no Xet headers, so huggingface_hub downloads over plain
# HTTP; one access token for every gated repo.
#
# Configuration: the JSON file named by the first argument:
#   {"port": 8080, "token": "hf_...", "repos": [{"id": "owner/name", "dir": "/hub/repos/x",
#     "commit": "<40 hex>", "branches": {"main": "<40 hex>"}, "gated": false,
#     "dropOnce": {"file": "model.safetensors", "after": 524288}}]}
# `dropOnce`: the first GET of that file closes the connection after `after` bytes of the body (a
# network failure in the middle of a download); the next ones are served whole.
#
# Every request is logged on stdout as one JSON line: {"client", "method", "path", "range", "status",
# "bytes", "auth"} (auth: whether an Authorization header came, never the token).
import hashlib
import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

CONFIG = json.load(open(sys.argv[1]))
LOCK = threading.Lock()
DROPPED = set()


def git_blob_oid(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, spec):
        self.id = spec["id"]
        self.commit = spec["commit"]
        self.branches = spec.get("branches", {})
        self.gated = bool(spec.get("gated", False))
        self.drop_once = spec.get("dropOnce")
        self.files = {}
        root = spec["dir"]
        for base, _dirs, names in os.walk(root):
            for name in names:
                full = os.path.join(base, name)
                rel = os.path.relpath(full, root)
                with open(full, "rb") as handle:
                    data = handle.read()
                # Like the Hub: weights are LFS files (.gitattributes of a model repo), the rest git blobs.
                lfs = rel.endswith((".safetensors", ".bin", ".pt", ".gguf"))
                self.files[rel] = {
                    "path": full,
                    "size": len(data),
                    "oid": git_blob_oid(data) if not lfs else git_blob_oid(b"version https://git-lfs.github.com/spec/v1\n"),
                    "sha256": hashlib.sha256(data).hexdigest() if lfs else None,
                }

    def resolve(self, revision):
        if revision == self.commit:
            return self.commit
        return self.branches.get(revision)


REPOS = {spec["id"]: Repo(spec) for spec in CONFIG["repos"]}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hub-standin/1"

    def log_message(self, *args):
        pass

    def record(self, status, sent):
        line = {
            "client": self.client_address[0],
            "method": self.command,
            "path": self.path,
            "range": self.headers.get("Range"),
            "status": status,
            "bytes": sent,
            "auth": self.headers.get("Authorization") is not None,
        }
        with LOCK:
            print(json.dumps(line), flush=True)

    def answer(self, status, body=b"", headers=None, head=False):
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)
        self.record(status, 0 if head else len(body))

    def error(self, status, code, message, head=False):
        headers = {"Content-Type": "application/json", "X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self.answer(status, json.dumps({"error": message}).encode(), headers, head)

    def authorized(self, repo, head):
        """None when the request may read `repo`; else the error was sent."""
        auth = self.headers.get("Authorization")
        if auth is not None and auth != f"Bearer {CONFIG.get('token')}":
            self.error(401, None, "Invalid credentials in Authorization header", head)
            return False
        if repo.gated and auth is None:
            self.error(
                401,
                "GatedRepo",
                f"Access to model {repo.id} is restricted. You must have access to it and be authenticated to access it. Please log in.",
                head,
            )
            return False
        return True

    def route(self, head):
        path = unquote(urlsplit(self.path).path)
        api = re.fullmatch(r"/api/models/([^/]+/[^/]+)/(revision|tree)/([^/]+)(?:/(.*))?", path)
        resolve = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        match = api or resolve
        if not match:
            return self.error(404, None, "Sorry, we can't find the page you are looking for.", head)
        repo = REPOS.get(match.group(1))
        if repo is None:
            return self.error(
                401, "RepoNotFound", "Repository not found", head
            )
        if not self.authorized(repo, head):
            return None
        revision = api.group(3) if api else resolve.group(2)
        commit = repo.resolve(revision)
        if commit is None:
            return self.error(404, "RevisionNotFound", f"Invalid rev id: {revision}", head)
        if api and api.group(2) == "revision":
            body = {
                "id": repo.id,
                "modelId": repo.id,
                "sha": commit,
                "private": False,
                "gated": "auto" if repo.gated else False,
                "disabled": False,
                "tags": [],
                "siblings": [{"rfilename": name} for name in sorted(repo.files)],
            }
            return self.answer(200, json.dumps(body).encode(), {"Content-Type": "application/json"}, head)
        if api:
            prefix = (api.group(4) or "").strip("/")
            entries = []
            for name in sorted(repo.files):
                if prefix and not name.startswith(prefix + "/"):
                    continue
                info = repo.files[name]
                entry = {"type": "file", "oid": info["oid"], "size": info["size"], "path": name}
                if info["sha256"]:
                    entry["lfs"] = {"oid": info["sha256"], "size": info["size"], "pointerSize": 134}
                entries.append(entry)
            return self.answer(200, json.dumps(entries).encode(), {"Content-Type": "application/json"}, head)
        name = resolve.group(3)
        info = repo.files.get(name)
        if info is None:
            return self.error(404, "EntryNotFound", f"{name} does not exist on \"{revision}\"", head)
        return self.send_file(repo, commit, name, info, head)

    def send_file(self, repo, commit, name, info, head):
        size = info["size"]
        headers = {
            "X-Repo-Commit": commit,
            "ETag": f'"{info["oid"]}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
            "Content-Disposition": f'inline; filename="{os.path.basename(name)}";',
        }
        if info["sha256"]:
            headers["X-Linked-Etag"] = f'"{info["sha256"]}"'
            headers["X-Linked-Size"] = str(size)
        start = 0
        status = 200
        wanted = self.headers.get("Range")
        if wanted:
            match = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted.strip())
            if not match or int(match.group(1)) >= size:
                headers["Content-Range"] = f"bytes */{size}"
                return self.answer(416, b"", headers, head)
            start = int(match.group(1))
            end = int(match.group(2)) if match.group(2) else size - 1
            end = min(end, size - 1)
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
            length = end - start + 1
        else:
            length = size
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if head:
            self.record(status, 0)
            return None
        drop = repo.drop_once
        cut = None
        key = (repo.id, name)
        if drop and drop.get("file") == name:
            with LOCK:
                if key not in DROPPED:
                    DROPPED.add(key)
                    cut = int(drop.get("after", 0))
        sent = 0
        with open(info["path"], "rb") as handle:
            handle.seek(start)
            while sent < length:
                chunk = handle.read(min(65536, length - sent, cut - sent if cut is not None else 65536))
                if not chunk:
                    break
                self.wfile.write(chunk)
                sent += len(chunk)
                if cut is not None and sent >= cut:
                    # The network fails mid-transfer: the body ends early and the connection closes.
                    self.wfile.flush()
                    self.close_connection = True
                    self.record(status, sent)
                    self.connection.shutdown(2)
                    return None
        self.record(status, sent)
        return None

    def do_GET(self):
        self.route(head=False)

    def do_HEAD(self):
        self.route(head=True)


if __name__ == "__main__":
    server = ThreadingHTTPServer(("0.0.0.0", int(CONFIG.get("port", 8080))), Handler)
    server.daemon_threads = True
    print(json.dumps({"listening": server.server_address[1], "repos": sorted(REPOS)}), flush=True)
    server.serve_forever()
