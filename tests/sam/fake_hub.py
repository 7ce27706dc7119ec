"""A Hugging Face hub on 127.0.0.1, for the real huggingface_hub client (the network edge).

It answers what `voicestream.engine.models.hub.fetch_hub_assets` asks, as huggingface.co does:
`GET /api/models/<repo>/revision/<rev>` (repo info with the commit sha),
`GET /api/models/<repo>/tree/<rev>?recursive&expand` (entries with size, git blob id and, for
LFS files, their sha256), and `HEAD`/`GET /<repo>/resolve/<rev>/<path>` (the bytes, with the
X-Repo-Commit and ETag headers the client checks). `tamper(path, data)` serves other bytes than
the metadata describes, as a broken mirror or a corrupted transfer would.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data, usedforsecurity=False).hexdigest()


class FakeHub:
    def __init__(self, repo: str, commit: str, files: dict[str, bytes], lfs_suffixes: tuple[str, ...]) -> None:
        self.repo = repo
        self.commit = commit
        self.files = dict(files)
        self.served = dict(files)
        self.lfs = {path for path in files if path.endswith(lfs_suffixes)}
        self.downloads: list[str] = []

    def tamper(self, path: str, data: bytes) -> None:
        self.served[path] = data

    def entries(self) -> list[dict[str, object]]:
        folders = sorted({path.rsplit("/", 1)[0] for path in self.files if "/" in path})
        listing: list[dict[str, object]] = [
            {"type": "directory", "oid": "0" * 40, "size": 0, "path": f} for f in folders
        ]
        for path, data in sorted(self.files.items()):
            entry: dict[str, object] = {"type": "file", "oid": git_blob_id(data), "size": len(data), "path": path}
            if path in self.lfs:
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
            listing.append(entry)
        return listing

    def etag(self, path: str) -> str:
        data = self.files[path]
        return hashlib.sha256(data).hexdigest() if path in self.lfs else git_blob_id(data)


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet
            return

        def _send(self, status: int, body: bytes, headers: dict[str, str], head: bool = False) -> None:
            self.send_response(status)
            for key, value in {"Content-Length": str(len(body)), **headers}.items():
                self.send_header(key, value)
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _json(self, payload: object) -> None:
            self._send(200, json.dumps(payload).encode(), {"Content-Type": "application/json"})

        def _route(self, head: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            api = f"/api/models/{hub.repo}/"
            if path.startswith(api + "revision/"):
                if path.removeprefix(api + "revision/") not in (hub.commit, "main"):
                    return self._send(404, b'{"error": "Revision not found"}', {"X-Error-Code": "RevisionNotFound"})
                return self._json(
                    {"id": hub.repo, "sha": hub.commit, "siblings": [{"rfilename": p} for p in hub.files]}
                )
            if path.startswith(api + "tree/"):
                return self._json(hub.entries())
            resolve = f"/{hub.repo}/resolve/{hub.commit}/"
            if path.startswith(resolve) and path.removeprefix(resolve) in hub.files:
                name = path.removeprefix(resolve)
                if not head:
                    hub.downloads.append(name)
                headers = {"X-Repo-Commit": hub.commit, "ETag": f'"{hub.etag(name)}"'}
                return self._send(200, hub.served[name], headers, head=head)
            return self._send(404, b'{"error": "not found"}', {"X-Error-Code": "EntryNotFound"})

        def do_GET(self) -> None:
            self._route(head=False)

        def do_HEAD(self) -> None:
            self._route(head=True)

    return Handler


@contextlib.contextmanager
def serve(hub: FakeHub) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    thread = threading.Thread(target=server.serve_forever, name="fake-hub", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
