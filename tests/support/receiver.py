"""A webhook receiver on 127.0.0.1 for tests: records every POST, and fails, stalls or dribbles when told to."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from long_running_agent.notifications import SIGNATURE_HEADER, verify
from support.loopback import Loopback, QuietHandler

SECRET = "test-webhook-secret-0123456789abcdef"
# The length of a dribbled answer: at one byte per `trickle` seconds, far longer than any deadline.
TRICKLE_BYTES = 100


@dataclass(frozen=True)
class Received:
    body: bytes
    headers: dict[str, str]
    at: float  # time.monotonic() when the POST arrived

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.body)

    def signed_with(self, secret: str = SECRET) -> bool:
        return verify(secret, self.body, self.headers.get(SIGNATURE_HEADER, ""))


def every_event(_event: dict[str, Any]) -> bool:
    return True


@dataclass
class Receiver:
    """POSTs to `url` are recorded in `received`; the first `fail_first` answer `status`.

    A slow answer (for the events `slow` picks, all by default) waits `delay`
    seconds before it starts, or, with `trickle`, sends its body one byte
    every `trickle` seconds, so that no single read ever waits long.
    """

    fail_first: int = 0
    status: int = 500
    delay: float = 0.0
    trickle: float = 0.0
    slow: Callable[[dict[str, Any]], bool] = every_event
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server: Loopback | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start the receiver first"
        return f"http://127.0.0.1:{self._server.port}/hook"

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

        class Handler(QuietHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    receiver.received.append(Received(body, dict(self.headers.items()), time.monotonic()))
                    failing = len(receiver.received) <= receiver.fail_first
                slow = receiver.slow(json.loads(body))
                try:
                    if slow and receiver.trickle:
                        self._dribble()
                        return
                    if slow and receiver._closing.wait(receiver.delay):
                        return
                    self.send_response(receiver.status if failing else 200)
                    self.end_headers()
                    self.wfile.write(b"no" if failing else b"ok")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the sender gave up on this attempt

            def _dribble(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(TRICKLE_BYTES))
                self.end_headers()
                for _ in range(TRICKLE_BYTES):
                    self.wfile.write(b".")
                    self.wfile.flush()
                    if receiver._closing.wait(receiver.trickle):
                        return

        self._server = Loopback(Handler)
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self._server is not None
        self._closing.set()  # slow answers end now, so the server closes at once
        self._server.stop()
