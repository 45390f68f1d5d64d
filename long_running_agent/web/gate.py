"""The server's gate: who may use ADK's routes, with which user id, and what they may send.

ADK's routes take the user id from the request and check nothing. In front of them this middleware refuses, as JSON
`{error, message, fix}`: another user's id behind TRUSTED_USER_HEADER, ADK's `/dev` routes that cannot be held to
one user, any write into the package folder, all but the chat and the inbox with PRODUCTION_MODE, what the
database cannot store, and a body over MAX_BODY on any route (body_limit.py). Why each route is open, scoped or
closed: docs/deployment.md. Other agents' A2A routes pass: they check their own credentials (docs/a2a.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..ledger import inputs
from ..settings import Settings
from .body_limit import MAX_BODY, bounded, too_large

MAX_ID = inputs.MAX_ID
A2A = "/a2a/"
# /apps/{app}[/users/{user}[/sessions/{session}]]..., and the same under /dev.
_APP_PATH = re.compile(r"^/(?:dev/)?apps/(?P<app>[^/]+)(?:/users/(?P<user>[^/]+)"
                       r"(?:/sessions/(?P<session>[^/]+))?)?(?:/|$)")
_BODY_USER_PATHS = ("/run", "/run_sse", "/agent-identity/finalize")  # the user id is in the JSON body
# What PRODUCTION_MODE serves; everything else of ADK's app is a development tool.
_PRODUCTION_PATHS = re.compile(r"^/(?:run|run_sse|list-apps|health|version|inbox(?:/inbox\.(?:js|css))?"
                               r"|api/approvals(?:/.*)?|apps/[^/]+/users/[^/]+/sessions(?:/[^/]+)?)$")
# ADK's /dev routes that stay open behind an identity header: the agent's structure, which holds nobody's data,
# and an event's graph, under the user's own id (the user check below holds it to them).
_DEV_OPEN_WITH_IDENTITY = re.compile(r"^/dev/apps/[^/]+/(?:graph|build_graph|build_graph_image"
                                     r"|users/[^/]+/sessions/[^/]+/events/[^/]+/graph)$")
# ADK's builder serves and copies the package's own files (a GET with ?tmp=true copies the whole package into
# it); every other /dev write is a POST, PUT or DELETE.
_DEV_BUILDER = re.compile(r"^/dev/apps/[^/]+/builder(?:/|$)")
_READS = ("GET", "HEAD")

# Ids in ADK's bodies (a run's invocation, an event and its call): ADK's tables hold 128 characters
# on PostgreSQL and anything on SQLite, so the same id must not be refused by one and kept by the other.
_ID_KEYS = {"invocationId", "invocation_id", "id", "functionCallEventId", "function_call_event_id"}


def _long_id(data: Any) -> tuple[str, str] | None:
    """(key, value) of the first id in `data` longer than MAX_ID, looking into every object and list."""
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    for key, value in items:
        if key in _ID_KEYS and isinstance(value, str) and len(value) > MAX_ID:
            return key, value
        if found := _long_id(value):
            return found
    return None


def _refusal(status: int, error: str, message: str, fix: str) -> JSONResponse:
    return JSONResponse({"error": error, "message": message, "fix": fix}, status_code=status)


def _not_in_production(path: str) -> JSONResponse:
    return _refusal(404, "not_served", f"{path} is not served in production mode.",
                    "Use the chat API (/run, /run_sse, /apps/...), /inbox or /api/approvals.")


class Gate:
    def __init__(self, app: ASGIApp, *, settings: Settings, apps: Iterable[str]) -> None:
        self.app = app
        self.header = settings.trusted_user_header.lower().encode() if settings.trusted_user_header else None
        self.header_name = settings.trusted_user_header
        self.production = settings.production
        # Slack's interactivity URL, served with Slack approvals on; it checks Slack's signature itself.
        self.served_to_slack = "/slack/actions" if settings.slack else None
        # /metrics, in production only behind its own token (web/scrape.py checks it).
        self.served_to_scrapers = "/metrics" if settings.metrics_token else None
        self.apps = frozenset(apps)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if scope["path"].startswith(A2A):  # other agents: their own tokens and body bound (a2a/endpoint.py)
                await self.app(scope, receive, send)
            else:
                await bounded(self._http, scope, receive, send)
            return
        refusal = self._websocket_refusal(scope) if scope["type"] == "websocket" else None
        if refusal is None:
            await self.app(scope, receive, send)
        elif "websocket.http.response" in scope.get("extensions", {}):
            await refusal(scope, receive, send)  # as the handshake's HTTP answer
        else:
            await send({"type": "websocket.close", "code": 1008})  # closing before accepting: a bare HTTP 403

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal, receive = await self._check(scope, receive)
        if refusal is not None:
            await refusal(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _check(self, scope: Scope, receive: Receive) -> tuple[JSONResponse | None, Receive]:
        """A refusal, or None; and the body's events for the app (replayed if read here)."""
        path: str = scope["path"]
        method: str = scope["method"]
        served = (self.served_to_slack, self.served_to_scrapers)
        if self.production and not (_PRODUCTION_PATHS.match(path) or path in served):
            return _not_in_production(path), receive
        identity = self._identity(scope)
        if isinstance(identity, JSONResponse):
            return identity, receive
        if (refusal := self._dev_route(path, method) or self._ids_in_url(scope)) is not None:
            return refusal, receive
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
            return too_large(), receive
        match = _APP_PATH.match(path)
        user: Any = match.group("user") if match else None
        if _takes_json(scope) or (path in _BODY_USER_PATHS and method == "POST"):
            body = await _read_body(receive)
            receive = _replay(body, receive)
            try:
                data = json.loads(body) if body else None
            except ValueError:
                data = None  # ADK answers a malformed body itself, as JSON
            if path in _BODY_USER_PATHS and isinstance(data, dict):
                user = data.get("userId", data.get("user_id"))
            return self._check_user(user, identity) or self._body(data), receive
        return self._check_user(user, identity), receive

    def _identity(self, scope: Scope) -> str | None | JSONResponse:
        """The proxy's user (None when the header is not configured or not sent), or a refusal."""
        sent = [value for name, value in scope["headers"] if name == self.header]
        if len(sent) > 1:
            # Proxies append to a header the client already sent: which copy is the proxy's cannot be told.
            return _refusal(400, "duplicate_identity",
                            f"The request carries the {self.header_name} header {len(sent)} times.",
                            f"Send it once: the authenticating proxy sets {self.header_name} and must drop "
                            "any copy the client sent.")
        return sent[0].decode("utf-8", "replace") if sent else None

    def _dev_route(self, path: str, method: str) -> JSONResponse | None:
        if path.startswith("/dev/") and (method not in _READS or _DEV_BUILDER.match(path)):
            return _refusal(404, "not_served", f"{method} {path} is not served here: ADK's builder, tests and eval "
                            "sets write into the package folder, which this server never lets a request change.",
                            "Build, test and keep eval sets with `.venv/bin/adk web` on your own machine, and commit "
                            "them.")
        open_to_all = _DEV_OPEN_WITH_IDENTITY.match(path) or (path == "/config/telemetry" and method in _READS)
        if self.header is None or open_to_all or not (path.startswith("/dev/") or path == "/config/telemetry"):
            return None
        return _refusal(404, "not_served", f"{path} is not served when {self.header_name} identifies users: ADK's "
                        "traces, eval sets and development tools show and change every user's conversations, and this "
                        "server's settings.", "Use the chat API (/run, /run_sse, /apps/{app}/users/{you}/...) and the "
                        "inbox; develop with `.venv/bin/adk web` on your own machine.")

    def _ids_in_url(self, scope: Scope) -> JSONResponse | None:
        path: str = scope["path"]
        match = _APP_PATH.match(path)
        if match and match.group("user") and inputs.unstorable(match.group("user")):
            return self._check_user(match.group("user"), None)  # said as for any other unusable user id
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        if inputs.unstorable(path) or inputs.unstorable([k + v for k, v in query]):
            return _refusal(422, "invalid_characters", "The URL contains a NUL character (%00) or bytes that "
                            "are not UTF-8 text; no id here has them.",
                            "Remove them and send the request again.")
        if match and match.group("app") not in self.apps:
            return self._unknown_app(match.group("app"))
        session = match.group("session") if match else None
        if session is not None and len(session) > MAX_ID:
            return self._long_session_id(session)
        return None

    def _body(self, data: Any) -> JSONResponse | None:
        if (where := inputs.unstorable(data)) is not None:
            return _refusal(422, "invalid_characters", f"The request body has a NUL character (\\u0000) or text that "
                            f"is not Unicode at {where}; the database cannot store it.",
                            "Remove the character and send the request again.")
        if not isinstance(data, dict):
            return None
        session = data.get("sessionId", data.get("session_id"))
        if isinstance(session, str) and len(session) > MAX_ID:
            return self._long_session_id(session)
        app = data.get("appName", data.get("app_name"))
        if isinstance(app, str) and app not in self.apps:
            return self._unknown_app(app)
        if long := _long_id(data):
            key, value = long
            return _refusal(422, "invalid_id", f"An id has at most {MAX_ID} characters; {key} has {len(value)}.",
                            f"Use ids of at most {MAX_ID} characters (ADK makes its own when you send none).")
        return None

    def _unknown_app(self, app: str) -> JSONResponse:
        return _refusal(404, "app_not_found", f"This server has no app {inputs.printable(app)[:80]!r}.",
                        f"Use {', '.join(sorted(self.apps))} (GET /list-apps lists the apps).")

    def _long_session_id(self, session: str) -> JSONResponse:
        return _refusal(422, "invalid_session_id",
                        f"A session id has at most {MAX_ID} characters; this one has {len(session)}.",
                        f"Use a session id of at most {MAX_ID} characters, or send none and ADK makes one.")

    def _websocket_refusal(self, scope: Scope) -> JSONResponse | None:
        """ADK's /run_live takes the user from its query string: the same checks as for /run."""
        if self.production:
            return _not_in_production(scope["path"])
        if (refusal := self._ids_in_url(scope)) is not None:
            return refusal
        identity = self._identity(scope)
        if isinstance(identity, JSONResponse):
            return identity
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "app_name" in query and query["app_name"] not in self.apps:
            return self._unknown_app(query["app_name"])
        return self._check_user(query.get("user_id"), identity)  # with no user_id, ADK refuses it itself

    def _check_user(self, user: Any, identity: str | None) -> JSONResponse | None:
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
        if identity is None:
            return _refusal(401, "missing_identity", f"This server takes the user from the {self.header_name} header, "
                            "and the request has none.", "Reach the server through the authenticating proxy.")
        try:
            you = inputs.name(identity, "user id")
        except inputs.InputError as error:
            return _refusal(403, "invalid_identity", str(error), "Ask your administrator to check your account name.")
        if you != user:
            return _refusal(403, "identity_mismatch", f"You are {you}; this request is for user {user!r}.",
                            f"Use your own user id, {you!r}.")
        return None


def _takes_json(scope: Scope) -> bool:
    """A body for ADK's routes that FastAPI reads as JSON (ours check their own bodies)."""
    if scope["method"] not in ("POST", "PUT", "PATCH") or scope["path"].startswith(("/api/approvals", "/inbox")):
        return False
    content_type = dict(scope["headers"]).get(b"content-type", b"").lower()
    return not content_type or b"json" in content_type


async def _read_body(receive: Receive) -> bytes:
    """The whole body, from a `receive` that stops it at MAX_BODY (body_limit.py)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
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
