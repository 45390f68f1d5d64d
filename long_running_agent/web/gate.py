"""The server's gate: who may use ADK's routes, with which user id, and how much they may send.

ADK's routes (`/apps/...`, `/run`, `/run_sse`) take the user id from the
request and check nothing. In front of them this middleware:

- refuses user ids that are not plain canonical names (inputs.py);
- with TRUSTED_USER_HEADER set (the header an authenticating proxy such as
  oauth2-proxy or IAP sets), requires that header and requires the user id
  of the request to be that user, so nobody can read or write another
  person's conversations;
- with PRODUCTION_MODE, serves only the chat API, the inbox and its API:
  not the dev UI, not ADK's `/dev` builder, deploy and eval routes;
- refuses bodies over MAX_BODY before reading them whole.

Answers are JSON `{error, message, fix}`, like the approvals API.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..ledger import inputs
from ..settings import Settings

MAX_BODY = 256 * 1024
_USER_PATH = re.compile(r"^/apps/[^/]+/users/(?P<user>[^/]+)(?:/|$)")
_BODY_USER_PATHS = ("/run", "/run_sse")
# What PRODUCTION_MODE serves; everything else of ADK's app is a development tool.
_PRODUCTION_PATHS = re.compile(
    r"^/(?:run|run_sse|list-apps|health|version|inbox(?:/inbox\.(?:js|css))?|api/approvals(?:/.*)?"
    r"|apps/[^/]+/users/[^/]+/sessions(?:/[^/]+)?)$"
)


def _refusal(status: int, error: str, message: str, fix: str) -> JSONResponse:
    return JSONResponse({"error": error, "message": message, "fix": fix}, status_code=status)


class Gate:
    def __init__(self, app: ASGIApp, *, settings: Settings) -> None:
        self.app = app
        self.header = settings.trusted_user_header.lower().encode() if settings.trusted_user_header else None
        self.header_name = settings.trusted_user_header
        self.production = settings.production

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and self.production:
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if self.production and not _PRODUCTION_PATHS.match(path):
            await _refusal(404, "not_served", f"{path} is not served in production mode.",
                           "Use the chat API (/run, /run_sse, /apps/...), /inbox or /api/approvals.")(
                scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
            await self._too_large(scope, receive, send)
            return
        user: Any = None
        if match := _USER_PATH.match(path):
            user = match.group("user")
        elif path in _BODY_USER_PATHS and scope["method"] == "POST":
            body = await _read_body(receive)
            if body is None:
                await self._too_large(scope, receive, send)
                return
            user = _user_in(body)
            receive = _replay(body, receive)
        else:
            await self.app(scope, receive, send)
            return
        refusal = self._check_user(scope, user)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _check_user(self, scope: Scope, user: Any) -> JSONResponse | None:
        if user is None:
            return None  # ADK answers a malformed body itself, as JSON
        try:
            canonical = inputs.name(user, "user id")
        except inputs.InputError as error:
            return _refusal(422, "invalid_user_id", str(error), "Use a plain lower-case user id, e.g. alice.")
        if canonical != user:
            return _refusal(422, "invalid_user_id", f"User ids are written in one spelling here: {canonical!r}.",
                            f"Use {canonical!r} as the user id.")
        if self.header is None:
            return None
        claimed = dict(scope["headers"]).get(self.header)
        if claimed is None:
            return _refusal(401, "missing_identity", f"This server takes the user from the {self.header_name} header, "
                            "and the request has none.", "Reach the server through the authenticating proxy.")
        try:
            identity = inputs.name(claimed.decode("utf-8", "replace"), "user id")
        except inputs.InputError as error:
            return _refusal(403, "invalid_identity", str(error), "Ask your administrator to check your account name.")
        if identity != user:
            return _refusal(403, "identity_mismatch", f"You are {identity}; this request is for user {user!r}.",
                            f"Use your own user id, {identity!r}.")
        return None

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _refusal(413, "too_large", f"The request body is over {MAX_BODY // 1024} KiB.",
                       f"Send a shorter message: chat messages are limited to {inputs.MAX_MESSAGE:,} characters.")(
            scope, receive, send)


async def _read_body(receive: Receive) -> bytes | None:
    """The whole body, or None once it grows past MAX_BODY."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def _replay(body: bytes, original: Receive) -> Receive:
    """The body once more for the app; after that, the client's own events (a disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await original()

    return receive


def _user_in(body: bytes) -> Any:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data.get("userId", data.get("user_id")) if isinstance(data, dict) else None
