"""A fake Slack on 127.0.0.1 for tests: an incoming webhook, response_urls, and the Web API's views.open.

    POST /hook              the incoming webhook (APPROVAL_WEBHOOK_URL): the new-ticket messages
    POST /response/<name>   a message's response_url: the updates and the ephemeral replies
    POST /api/views.open    what slack_sdk's WebClient calls with SLACK_API_URL pointed here

Everything is recorded. The first `fail_responses` POSTs to a response_url
answer 500 (Slack having a bad minute); `views_error` makes views.open answer
`{"ok": false, "error": ...}`, as Slack does for an expired trigger.
Requests from Slack to the app are made here too: `signed(...)` signs a payload as
Slack does, with slack_sdk's own SignatureVerifier.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

from support.loopback import Loopback, QuietHandler

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOT_TOKEN = "xoxb-0000-test-token"
# Slack users and the approvers they are (alice is also the requester in these tests).
BOB, CAROL, ALICE = "UBOB0001", "UCAROL001", "UALICE001"
USERS = {BOB: "bob", CAROL: "carol", ALICE: "alice"}
STRANGER = "UMALLORY1"


@dataclass(frozen=True)
class Posted:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass
class FakeSlack:
    fail_responses: int = 0
    views_error: str | None = None
    posted: list[Posted] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: Loopback | None = None
        self._response_posts = 0

    def url(self, path: str) -> str:
        assert self._server is not None, "start the fake Slack first"
        return f"http://127.0.0.1:{self._server.port}{path}"

    def at(self, path: str) -> list[dict[str, Any]]:
        with self._lock:
            return [p.body for p in self.posted if p.path == path]

    def wait_for(self, path: str, count: int = 1, timeout: float = 30) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(self.at(path)) < count:
            time.sleep(0.05)
        return self.at(path)

    async def arrived(self, path: str, count: int = 1, timeout: float = 30) -> list[dict[str, Any]]:
        """`wait_for` for a test whose server runs in its own event loop: it waits without blocking it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(self.at(path)) < count:
            await asyncio.sleep(0.05)
        return self.at(path)

    def __enter__(self) -> FakeSlack:
        slack = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.loads(raw) if raw else {}
                with slack._lock:
                    slack.posted.append(Posted(self.path, body, dict(self.headers.items())))
                    if self.path.startswith("/response/"):
                        slack._response_posts += 1
                        failing = slack._response_posts <= slack.fail_responses
                    else:
                        failing = False
                if self.path == "/api/views.open":
                    answer = {"ok": False, "error": slack.views_error} if slack.views_error else {
                        "ok": True, "view": {"id": "V0001", **body.get("view", {})}}
                    self._answer(200, json.dumps(answer).encode(), "application/json")
                    return
                self._answer(500 if failing else 200, b"slack is having a bad minute" if failing else b"ok",
                             "text/plain")

            def _answer(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = Loopback(Handler)
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self._server is not None
        self._server.stop()


def signed(payload: dict[str, Any] | str, *, at: float, secret: str = SIGNING_SECRET) -> tuple[bytes, dict[str, str]]:
    """The body and headers of Slack's request carrying `payload` (JSON text as is), signed at Unix time `at`."""
    body = urlencode({"payload": payload if isinstance(payload, str) else json.dumps(payload)}).encode()
    timestamp = str(int(at))
    signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
    assert signature is not None
    return body, {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": signature,
                  "Content-Type": "application/x-www-form-urlencoded"}


def click(user: str, action_id: str, ticket_id: str, response_url: str, trigger_id: str = "T-trigger-1"
          ) -> dict[str, Any]:
    """Slack's block_actions payload for a button of a new-ticket message."""
    return {
        "type": "block_actions", "user": {"id": user, "username": USERS.get(user, "mallory")},
        "team": {"id": "T0TEAM"}, "trigger_id": trigger_id, "response_url": response_url,
        "container": {"type": "message", "message_ts": "1700000000.000100"},
        "actions": [{"type": "button", "action_id": action_id, "block_id": "decide", "value": ticket_id,
                     "action_ts": "1700000001.000200"}],
    }


def submission(user: str, view: dict[str, Any], *, reason: str, amount: str | None = None) -> dict[str, Any]:
    """Slack's view_submission payload for a form this app opened (`view` as views.open received it)."""
    values = {"reason": {"reason": {"type": "plain_text_input", "value": reason}}}
    if amount is not None:
        values["amount"] = {"amount": {"type": "plain_text_input", "value": amount}}
    return {
        "type": "view_submission", "user": {"id": user}, "team": {"id": "T0TEAM"},
        "view": {"id": "V0001", "callback_id": view["callback_id"], "private_metadata": view["private_metadata"],
                 "state": {"values": values}},
    }
