"""Client ID Metadata Documents served by the tests themselves on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit
from urllib.request import urlopen

from oauth2_provider.cimd import CIMDError, SafeMetadataFetcher


class LoopbackMetadataFetcher(SafeMetadataFetcher):
    """Fetch `https://127.0.0.1:PORT/...` client ids over plain HTTP. Test settings only."""

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        parts = urlsplit(client_id)
        if parts.hostname != "127.0.0.1":
            raise CIMDError("the test fetcher only reaches 127.0.0.1")
        with urlopen(f"http://127.0.0.1:{parts.port}{parts.path}", timeout=5) as response:  # noqa: S310
            return json.loads(response.read()), 300


@contextmanager
def serve_documents(documents: dict[str, dict[str, Any]]) -> Iterator[int]:
    """Serve `{path: json}` on a free 127.0.0.1 port; yields the port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            document = documents.get(self.path)
            body = json.dumps(document).encode() if document is not None else b"{}"
            self.send_response(200 if document is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
