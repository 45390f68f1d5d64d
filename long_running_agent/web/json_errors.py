"""Every error of the server answered as JSON `{error, message, fix}`, never a plain 500.

Starlette's outermost handler answers "Internal Server Error" as text and re-raises, which makes uvicorn drop the
keep-alive connection: `JsonErrors` sits inside it.
"""

from __future__ import annotations

import contextlib
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError, WebSocketRequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.websockets import WebSocket
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..adk_compat import is_resume_refusal
from ..refusals import Refusal
from ..refusals.rules import DatabaseFileGone
from .adk_wording import handshake_refused, invalid_function_response, plain_error, refused_by_adk, reworded_event
from .api_errors import ApiError, invalid_request, refusal_error, unexpected_error
from .database_errors import bad_value, database_error, database_failure, request_database_error
from .routes import invalid_approvals_request

logger = logging.getLogger(__name__)


class JsonErrors:
    """Answer any unexpected error with JSON, and let the connection live.

    A started stream (an SSE run) can only be ended, ADK's error events in it reworded; a plain-text error answer
    (ADK's origin check) becomes JSON with its status kept.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                send = json_handshake_refusals(scope, receive, send)
            await self.app(scope, receive, send)
            return
        started = streaming = False
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
            from_database = database_failure(error) is not None
            if not from_database:
                logger.exception("Unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if started:
                with contextlib.suppress(Exception):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            answer = database_error(error, scope["method"], scope["path"]) if from_database else unexpected_error(error)
            await answer.response()(scope, receive, send)


def json_handshake_refusals(scope: Scope, receive: Receive, send: Send) -> Send:
    """`send` for a WebSocket: a close before the handshake was accepted becomes a JSON 403, where the server can."""
    accepted = False

    async def sending(message: Message) -> None:
        nonlocal accepted
        if message["type"] in ("websocket.accept", "websocket.http.response.start"):
            accepted = True  # accepted, or already answered over HTTP
        elif (message["type"] == "websocket.close" and not accepted
              and "websocket.http.response" in scope.get("extensions", {})):
            accepted = True
            # A response on a WebSocket scope is sent as the handshake's HTTP answer.
            await handshake_refused(str(message.get("reason") or "")).response()(scope, receive, send)
            return
        await send(message)

    return sending


def install_json_errors(server: FastAPI) -> None:
    @server.exception_handler(ApiError)
    async def _api_error(_request: Request, error: ApiError) -> JSONResponse:
        return error.response()

    @server.exception_handler(Refusal)
    async def _refused(_request: Request, error: Refusal) -> JSONResponse:
        return refusal_error(error).response()

    @server.exception_handler(HTTPException)
    async def _wrapped(request: Request, error: HTTPException) -> Response:
        # ADK's create-session route (and others) answer any error of their store as a 500 whose detail is
        # str(error): for SQLAlchemy, the SQL and its parameters. The cause says what happened.
        if database_failure(error) is not None:
            return request_database_error(request, error).response()
        if error.status_code >= 500:
            logger.error("%s %s failed: %s", request.method, request.url.path, error.detail)
            return unexpected_error(error.__cause__ or error).response()
        return refused_by_adk(error).response()

    @server.exception_handler(DBAPIError)
    @server.exception_handler(DatabaseFileGone)
    @server.exception_handler(OSError)  # the database cannot be reached
    async def _database_failed(request: Request, error: Exception) -> JSONResponse:
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
        ours = request.url.path.startswith("/api/approvals")
        return (invalid_approvals_request(error) if ours else invalid_request(error)).response()

    @server.exception_handler(ValueError)
    async def _bad_resume(request: Request, error: ValueError) -> JSONResponse:
        # ADK's /run lets its refusals of a message that cannot resume anything (adk_compat.py) escape as a
        # plain-text 500; they are the caller's mistake, so say which and how to answer a pending call.
        if bad_value(error) is not None:
            return request_database_error(request, error).response()
        if request.url.path != "/run" or not is_resume_refusal(str(error)):
            return unexpected_error(error).response()
        return invalid_function_response(str(error)).response()
