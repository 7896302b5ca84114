"""A local stand-in for the Hugging Face hub's file endpoint, for the browser tests and benchmarks/hub_headers.py.

``GET /{owner}/{name}/resolve/main/{file}`` serves ``file`` from one folder (whatever the repository), honouring a
single ``Range: bytes=FIRST-LAST`` as the hub does (206 Partial Content with ``Content-Range: bytes FIRST-LAST/SIZE``;
HTTP semantics, RFC 9110 section 14), a missing file being 404. It sends the CORS headers a page on another origin
needs to read the answer and its Content-Range, and counts the body bytes it sends. The page's requests to
https://huggingface.co reach it through Playwright's routing (``forward``), so no test touches the network.
"""

import os
import re
import ssl
import threading
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RANGE = re.compile(r"bytes=(\d+)-(\d*)$")
PATH = re.compile(r"^/[^/]+/[^/]+/resolve/main/([\w.-]+)$")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"        # connections kept open between requests, as a browser expects of a hub

    def __init__(self, hub, *args, **kwargs):
        self.hub = hub
        super().__init__(*args, **kwargs)

    def log_message(self, *args):
        pass

    def _cors(self):
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Allow-Headers", "Range")
        self.send_header("Access-Control-Expose-Headers", "Content-Range, Content-Length, Accept-Ranges")

    def do_OPTIONS(self):            # a preflight, should a browser send one for the Range header
        self.send_response(204)
        self._cors()
        self.end_headers()

    def do_GET(self):
        match = PATH.match(self.path.split("?")[0])
        path = os.path.join(self.hub.folder, match.group(1)) if match else ""
        if not match or not os.path.isfile(path):
            self.send_response(404)
            self._cors()
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        size = os.path.getsize(path)
        first, last, status = 0, size - 1, 200
        wanted = RANGE.match(self.headers.get("Range", ""))
        if wanted:
            first = int(wanted.group(1))
            last = min(size - 1, int(wanted.group(2))) if wanted.group(2) else size - 1
            status = 206
        with open(path, "rb") as handle:
            handle.seek(first)
            body = handle.read(max(0, last - first + 1))
        self.send_response(status)
        self._cors()
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        with self.hub.lock:
            self.hub.sent += len(body)
            self.hub.requests += 1


class StandInHub:
    """The stand-in on a free localhost port while in a ``with`` block: ``url``, ``sent`` (body bytes sent) and
    ``requests`` (answered)."""

    def __init__(self, folder, tls=None):
        """``tls``: (certificate file, key file) to answer HTTPS, as the hub does (benchmarks/hub_headers.py points
        the browser's huggingface.co at it); plain HTTP otherwise."""
        self.folder, self.sent, self.requests, self.lock = str(folder), 0, 0, threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Handler, self))
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_port
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def forward(self, context):
        """Route every request the context makes to https://huggingface.co to this stand-in, headers (Range) and all."""
        def route(route):
            response = route.fetch(url=route.request.url.replace("https://huggingface.co", self.url, 1))
            route.fulfill(response=response)
        context.route("https://huggingface.co/**", route)
