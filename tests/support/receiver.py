"""A webhook receiver on 127.0.0.1 for tests: records every POST, and fails or stalls when told to."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from long_running_agent.notifications import SIGNATURE_HEADER, verify

SECRET = "test-webhook-secret-0123456789abcdef"


@dataclass(frozen=True)
class Received:
    body: bytes
    headers: dict[str, str]

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.body)

    def signed_with(self, secret: str = SECRET) -> bool:
        return verify(secret, self.body, self.headers.get(SIGNATURE_HEADER, ""))


@dataclass
class Receiver:
    """POSTs to `url` are recorded in `received`; the first `fail_first` answer `status`, each waits `delay` s."""

    fail_first: int = 0
    status: int = 500
    delay: float = 0.0
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start the receiver first"
        return f"http://127.0.0.1:{self._server.server_port}/hook"

    def events(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r.json for r in self.received]

    def wait_for(self, count: int, timeout: float = 30) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(self.received) < count:
            time.sleep(0.05)
        return self.events()

    def __enter__(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    receiver.received.append(Received(body, {k: v for k, v in self.headers.items()}))
                    failing = len(receiver.received) <= receiver.fail_first
                time.sleep(receiver.delay)
                self.send_response(receiver.status if failing else 200)
                self.end_headers()
                self.wfile.write(b"no" if failing else b"ok")

            def log_message(self, *_args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
