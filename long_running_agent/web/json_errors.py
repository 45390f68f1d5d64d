"""The middleware that answers every error of the server as JSON `{error, message, fix}`, never a plain 500.

Starlette's outermost handler answers "Internal Server Error" as text and
re-raises, which makes uvicorn drop the keep-alive connection. `JsonErrors`
sits inside it; `install` gives each kind of error its handler.
"""

from __future__ import annotations

import contextlib
import json
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError, WebSocketRequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.websockets import WebSocket
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..adk_compat import is_resume_refusal
from ..paging import DEFAULT_LIMIT, MAX_LIMIT
from ..refusals import Refusal
from ..refusals.rules import DatabaseFileGone
from .adk_wording import handshake_refused, invalid_function_response, plain_error, refused_by_adk, reworded_event
from .api_errors import ApiError, invalid_request, problems, refusal_error, unexpected_error
from .database_errors import (
    _bad_value,
    database_error,
    database_failure,
    database_file_gone,
    file_gone,
    request_database_error,
)

logger = logging.getLogger(__name__)


class JsonErrors:
    """Answer any unexpected error with JSON `{error, message, fix}`, never a plain-text 500.

    Starlette's outermost handler answers "Internal Server Error" as text and
    re-raises, which makes uvicorn drop the keep-alive connection. This one
    sits inside it, answers JSON, and lets the connection live. A stream that
    already started (an SSE run) can only be ended; an error event ADK writes
    into one is reworded like any other error (`stream_error`).

    An error answer that is not JSON (ADK's origin check writes "Forbidden:
    host not allowed" as text) is rewritten as JSON with its status kept, and
    a WebSocket handshake refused before it was accepted is answered with a
    JSON 403 rather than a bare one, where the server offers ASGI's
    "websocket.http.response" extension (uvicorn does).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self.app(scope, receive, json_handshake_refusals(scope, send))
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False
        streaming = False
        held: Message | None = None  # the start of a plain-text error answer, rewritten once its body is in
        held_body: list[bytes] = []

        async def tracking_send(message: Message) -> None:
            nonlocal started, streaming, held
            if message["type"] == "http.response.start":
                started = True
                content_type = dict(message.get("headers", [])).get(b"content-type", b"")
                streaming = content_type.startswith(b"text/event-stream")
                if message["status"] >= 400 and b"json" not in content_type and not streaming \
                        and scope["method"] != "HEAD":  # a HEAD answer has no body to rewrite
                    held = message
                    return
            elif held is not None and message["type"] == "http.response.body":
                held_body.append(message.get("body", b""))
                if message.get("more_body"):
                    return
                kept = {name.decode("latin-1"): value.decode("latin-1") for name, value in held.get("headers", [])
                        if name.lower() in (b"allow", b"retry-after", b"www-authenticate")}
                answer = plain_error(held["status"], b"".join(held_body).decode("utf-8", "replace"))
                answer.headers = kept | answer.headers
                await answer.response()(scope, receive, send)
                return
            elif streaming and message["type"] == "http.response.body":
                message = {**message, "body": reworded_event(message.get("body", b""))}
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as error:
            gone = file_gone(error)
            if gone is None and database_failure(error) is None:
                logger.exception("Unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if started:
                with contextlib.suppress(Exception):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            answer = (database_error(error, scope["method"], scope["path"]) if database_failure(error)
                      else unexpected_error(error))
            await answer.response()(scope, receive, send)


def json_handshake_refusals(scope: Scope, send: Send) -> Send:
    """`send` for a WebSocket: a close before the handshake was accepted becomes a JSON 403, where the server can."""
    accepted = False

    async def sending(message: Message) -> None:
        nonlocal accepted
        if message["type"] in ("websocket.accept", "websocket.http.response.start"):
            accepted = True  # accepted, or already answered over HTTP
        elif (message["type"] == "websocket.close" and not accepted
              and "websocket.http.response" in scope.get("extensions", {})):
            accepted = True
            answer = handshake_refused(str(message.get("reason") or ""))
            await send({"type": "websocket.http.response.start", "status": answer.status,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "websocket.http.response.body", "body": json.dumps(answer.body()).encode()})
            return
        await send(message)

    return sending


def install_json_errors(server: FastAPI) -> None:
    """Answer every error of `server` (ADK's routes and ours) as JSON."""

    @server.exception_handler(ApiError)
    async def _api_error(_request: Request, error: ApiError) -> JSONResponse:
        return error.response()

    @server.exception_handler(Refusal)
    async def _refused(_request: Request, error: Refusal) -> JSONResponse:
        # What the ledger, an input rule or the session store refuses: the catalogue's words.
        if isinstance(error, DatabaseFileGone):
            return database_file_gone(error).response()
        return refusal_error(error).response()

    @server.exception_handler(HTTPException)
    async def _wrapped(request: Request, error: HTTPException) -> Response:
        # ADK's create-session route (and a few others) answer any error of
        # their store as a 500 whose detail is str(error): for SQLAlchemy, the
        # SQL statement and its parameters. The cause says what happened.
        if database_failure(error) is not None:
            return request_database_error(request, error).response()
        if error.status_code >= 500:
            logger.error("%s %s failed: %s", request.method, request.url.path, error.detail)
            return unexpected_error(error.__cause__ or error).response()
        return refused_by_adk(error).response()

    @server.exception_handler(DBAPIError)
    async def _database_failed(request: Request, error: DBAPIError) -> JSONResponse:
        return request_database_error(request, error).response()

    @server.exception_handler(OSError)
    async def _database_unreachable(request: Request, error: OSError) -> JSONResponse:
        return request_database_error(request, error).response()

    @server.exception_handler(WebSocketRequestValidationError)
    async def _invalid_handshake(websocket: WebSocket, error: WebSocketRequestValidationError) -> None:
        # FastAPI closes it with the errors as the reason; the client then gets a bare 403.
        if "websocket.http.response" in websocket.scope.get("extensions", {}):
            await websocket.send_denial_response(invalid_request(error).response())
        else:
            await websocket.close(code=1008, reason="invalid query: app_name, user_id and session_id are required")

    @server.exception_handler(RequestValidationError)
    async def _invalid_body(request: Request, error: RequestValidationError) -> JSONResponse:
        if not request.url.path.startswith("/api/approvals"):
            return invalid_request(error).response()
        if all(e["loc"][0] == "query" for e in error.errors()):  # the list's paging (web/routes.py's InboxQuery)
            wrong = "; ".join(f"{e['loc'][-1]}: {e['msg']}" for e in error.errors())
            return ApiError(
                422, "invalid_query", f"The query is not valid: {wrong}.",
                f"Page with ?limit=N&offset=N (N from 1 to {MAX_LIMIT}, default {DEFAULT_LIMIT}; offset from 0) for "
                "pending tickets and ?undelivered_limit=N&undelivered_offset=N for decisions not delivered yet; "
                "each answer's pending_page.next_offset is where the next page starts.",
            ).response()
        return ApiError(
            422, "invalid_body", f"The request body is not valid: {problems(error.errors(), within='body')}.",
            'Send JSON like {"reason": "not a business expense"} (reason: text, at most 500 '
            "characters; required to reject), or no body to approve; to approve less than was asked, "
            '{"amount": 200, "reason": "..."}.',
        ).response()

    @server.exception_handler(ValueError)
    async def _bad_resume(request: Request, error: ValueError) -> JSONResponse:
        # ADK's /run lets its refusals of a message that cannot resume anything
        # (adk_compat.py) escape as a plain-text 500; they are the caller's
        # mistake, so say which and how to answer a pending call.
        if _bad_value(error) is not None:
            return request_database_error(request, error).response()
        if request.url.path != "/run" or not is_resume_refusal(str(error)):
            return unexpected_error(error).response()
        return invalid_function_response(str(error)).response()
