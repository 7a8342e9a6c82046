"""HTML pages served on a free port of 127.0.0.1 by a thread, for the tests that drive a browser."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NOT_FOUND = b"<h1>Not found</h1>"


@contextlib.contextmanager
def serve_pages(pages: Mapping[str, str | bytes]) -> Iterator[str]:
    """Serve ``pages`` (path to HTML; the query string is ignored, other paths are 404).

    Yields the base URL, ``http://127.0.0.1:PORT`` with no trailing slash.
    """
    encoded = {path: page.encode() if isinstance(page, str) else page for path, page in pages.items()}

    class Pages(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = encoded.get(self.path.split("?")[0])
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body if body is not None else NOT_FOUND)))
            self.end_headers()
            self.wfile.write(body if body is not None else NOT_FOUND)

        def log_message(self, format: str, *args: object) -> None:  # keep the test output clean
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
