"""An HTTP server on 127.0.0.1 in a thread, for the fakes the app POSTs to: a webhook receiver, a fake Slack."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that keeps http.server's access log out of the tests' output."""

    def log_message(self, *_args: Any) -> None:
        pass


class Loopback:
    """`handler` serving on a free port of 127.0.0.1 until `stop()`."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        # A short poll: shutdown() waits for it, and so does every test's teardown (0.5 s by default).
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def port(self) -> int:
        return self._server.server_port

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
