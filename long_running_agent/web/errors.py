"""Every answer of the server that is not a success: JSON `{error, message, fix}`, never a plain 500.

The domain's refusals are defined once, with their codes, messages and next
steps (refusals.py); this module gives each its status code and words its
next step as this API's routes. The rest are the server's own failures: the
database, ADK's resume errors, a body that is not JSON, FastAPI's validation
of ADK's routes, and ADK's plain-text 403s (its DNS-rebinding and origin
checks) and WebSocket handshake refusals, which `JsonErrors` rewrites.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError, WebSocketRequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.websockets import WebSocket
from sqlalchemy.exc import DBAPIError, IntegrityError
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..adk_compat import is_resume_refusal
from ..ledger.inputs import MAX_ID, printable
from ..paging import DEFAULT_LIMIT, MAX_LIMIT
from ..refusals import Actions, DatabaseFileGone, ModelUnavailable, Refusal, causes, without_sql

logger = logging.getLogger(__name__)


class ApiError(Exception):
    """An answer that is not a success, as a JSON body."""

    def __init__(
        self, status: int, error: str, message: str, fix: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.error, self.message, self.fix = status, error, message, fix
        self.headers = dict(headers or {})
        if status == 401:
            self.headers["WWW-Authenticate"] = "Bearer"

    def body(self) -> dict[str, str]:
        return {"error": self.error, "message": self.message, "fix": self.fix}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers or None)


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


# ADK's origin check (google/adk/cli/api_server.py) answers these as plain text, and
# closes a /run_live handshake with the same reasons.
_ADK_FORBIDDEN = {
    "host not allowed": (
        "host_not_allowed",
        "This server listens on a loopback address and answers only requests addressed to 127.0.0.1, localhost "
        "or ::1; this one named another host (ADK's protection against DNS rebinding).",
        "Address it as http://127.0.0.1:PORT or http://localhost:PORT; to serve it under another name, start it "
        "with --host and put it behind a proxy (docs/deployment.md).",
    ),
    "origin not allowed": (
        "origin_not_allowed",
        "A page of another origin may not call this server: its Origin header names neither this server nor, "
        "for a loopback server, another loopback address (ADK's protection against cross-site requests).",
        "Call it from the dev UI or the inbox this server serves, or from a program that sends no Origin header "
        "(curl, a script).",
    ),
}


def plain_error(status: int, text: str) -> ApiError:
    """An error answer written as plain text (by ADK's middleware, before any route), as JSON."""
    said = printable(text).strip()
    reason = said.removeprefix("Forbidden:").strip().lower()
    if reason in _ADK_FORBIDDEN:
        return ApiError(status, *_ADK_FORBIDDEN[reason])
    if status >= 500:
        return unexpected_error(RuntimeError(said))
    return ApiError(status, "refused", f"{said[:300].rstrip('.') or 'Refused'}.",
                    "Check the request against docs/http-api.md.")


def handshake_refused(reason: str) -> ApiError:
    """A WebSocket handshake closed before it was accepted (ADK's /run_live checks), as a JSON 403."""
    said = printable(reason).strip()
    if said.lower() in _ADK_FORBIDDEN:
        return ApiError(403, *_ADK_FORBIDDEN[said.lower()])
    return ApiError(403, "websocket_refused", f"The WebSocket handshake was refused: {said[:300] or 'no reason'}.",
                    "Open /run_live with app_name, user_id and session_id in the query string, for a session "
                    "that exists (POST /apps/{app}/users/{user}/sessions).")


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


def problems(errors: Sequence[Any], within: str | None = None) -> str:
    """FastAPI's validation errors in one line: each field's path and what is wrong with it.

    `within` ("body") words the paths inside that part of the request, as the approvals API's fields.
    """
    def where(location: Sequence[Any]) -> str:
        inside = location[1:] if within else location
        return ".".join(str(part) for part in inside) or within or "request"

    return "; ".join("body: not valid JSON" if e["type"] == "json_invalid" else f"{where(e['loc'])}: {e['msg']}"
                     for e in errors)


def invalid_request(error: RequestValidationError | WebSocketRequestValidationError) -> ApiError:
    """FastAPI's validation of one of ADK's routes (a field missing or of the wrong type), as JSON."""
    return ApiError(
        422, "invalid_request", f"The request is not valid: {printable(problems(error.errors()))[:500]}.",
        "Send the fields the route takes, with their types (docs/http-api.md shows /run and the session routes; "
        "the server's /docs page lists every route's, except in production mode).",
    )


def unexpected_error(error: BaseException) -> ApiError:
    return ApiError(
        500, "internal_error",
        f"The server failed while answering: {type(error).__name__}. Nothing was changed by this answer "
        "unless GET /api/approvals/{id} shows it.",
        "Try again; if it persists, the server log has the details.",
    )


def database_unavailable(method: str, path: str, ticket: str | None) -> ApiError:
    """The database failed: say what may or may not have happened, and what to do."""
    deciding = method == "POST" and ticket
    message = (
        f"The database is unavailable, so this server cannot tell whether the decision on {ticket} was recorded."
        if deciding else "The database is unavailable; nothing was changed by this request."
    )
    fix = (
        f"When GET /health answers ok again, check GET /api/approvals/{ticket} and repeat only what is missing."
        if deciding else "Try again when GET /health answers ok."
    )
    return ApiError(503, "database_unavailable", message, fix, headers={"Retry-After": "5"})


def database_failure(error: BaseException) -> BaseException | None:
    """The database's own error behind `error` (a driver's, SQLAlchemy's, or the OS's), if any."""
    for cause in causes(error):
        if isinstance(cause, (DBAPIError, sqlite3.Error, OSError, DatabaseFileGone)):
            return cause
    return None


# PostgreSQL's SQLSTATE classes for a value the database refuses to store:
# 22 data exception (too long, NUL, bad encoding), 54 program limit exceeded.
_BAD_VALUE_CLASSES = ("22", "54")
# ...and the ones that say which.
_BAD_VALUE_MESSAGES = {
    "22001": f"a value is longer than the database stores (ids have at most {MAX_ID} characters)",
    "22021": "a text has a NUL character (\\u0000) or bytes that are not UTF-8",
    "22P05": "a text has a NUL character (\\u0000), which the database cannot store",
}


def _bad_value(error: BaseException) -> str | None:
    """Why the database refused a value of the request (not the database's fault), or None."""
    for cause in causes(error):
        if isinstance(cause, UnicodeError):
            return "a text is not valid Unicode"
        code = getattr(cause, "sqlstate", None) or getattr(getattr(cause, "orig", None), "sqlstate", None)
        if isinstance(code, str) and code[:2] in _BAD_VALUE_CLASSES:
            return _BAD_VALUE_MESSAGES.get(code, "a value cannot be stored by the database")
        if isinstance(cause, sqlite3.DataError):
            return "a value is too big for the database"
    return None


def database_error(error: BaseException, method: str, path: str, ticket: str | None = None) -> ApiError:
    """A failure in the database, worded by its cause: the request's data, a conflict, or the database itself.

    Never the driver's message: SQLAlchemy's carries the SQL statement and its parameters.
    """
    gone = file_gone(error)
    if gone is not None:
        return database_file_gone(gone)
    failure = database_failure(error) or error
    logger.warning("Database error on %s %s: %s", method, path, failure)
    if (why := _bad_value(error)) is not None:
        return ApiError(422, "invalid_value", f"The request was refused: {why}. Nothing was stored.",
                        f"Remove NUL characters (\\u0000), keep ids to at most {MAX_ID} characters, and send it "
                        "again.")
    if any(isinstance(cause, (IntegrityError, sqlite3.IntegrityError)) for cause in causes(error)):
        return ApiError(409, "conflict", "The request conflicts with what is stored: something with the same "
                        "id exists.", "Use another id (or none, to have one made), or read the one that exists.")
    return database_unavailable(method, path, ticket)


def request_database_error(request: Request, error: BaseException) -> ApiError:
    return database_error(error, request.method, request.url.path, request.path_params.get("ticket_id"))


# The actions a next step names, as this API's routes.
API = Actions(
    inbox="GET /api/approvals",
    show="GET /api/approvals/{ticket}",
    deliver="POST /api/approvals/{ticket}/deliver",
    decide="POST /api/approvals/{ticket}/approve or /reject",
    approve="POST /api/approvals/{ticket}/approve with their token",
    settle="POST /api/approvals/{ticket}/settle",
    approve_less='{"amount": 200, "reason": "over the per diem"}',
    restart="restart the server",
)

# The status code of each refusal (refusals.py); any other is a 409.
STATUS = {
    "ticket_not_found": 404, "not_allowed": 403, "not_requester": 403, "not_an_approver": 403,
    "database_file_gone": 503, "schema_behind": 503, "schema_ahead": 503, "schema_mismatch": 503,
    "invalid_input": 422, "invalid_body": 422, "reason_required": 422, "invalid_amount": 422,
    "conversation_unreachable": 502, "delivery_failed": 502, "conversation_missing": 410,
    "model_unavailable": 502,
}


def refusal_error(refusal: Refusal) -> ApiError:
    """A refusal as this API answers it: its status code, and the catalogue's code, message and next step."""
    code = refusal.code
    retry_after = getattr(refusal, "retry_after", None)
    headers = {"Retry-After": str(int(retry_after.total_seconds()))} if retry_after else None
    return ApiError(STATUS.get(code, 409), code, refusal.message, refusal.next_for(API), headers=headers)


def file_gone(error: BaseException) -> DatabaseFileGone | None:
    """The DatabaseFileGone behind `error`, if any: ADK wraps some errors (a 500 `{"detail"}` from it)."""
    return next((cause for cause in causes(error) if isinstance(cause, DatabaseFileGone)), None)


def database_file_gone(error: DatabaseFileGone) -> ApiError:
    """The SQLite file was deleted or replaced: nothing here works again until a restart."""
    logger.error("%s Restart the server (docs/deployment.md, \"The SQLite file\").", error)
    return refusal_error(error)


# ADK's and FastAPI's own refusals ({"detail": ...}), as {error, message, fix}.
_REFUSALS = {
    400: ("bad_request", "Check the request against docs/http-api.md and send it again."),
    404: ("not_found", "Check the app name, user id and session id in the path; GET /list-apps lists the apps "
                       "and GET /apps/{app}/users/{user}/sessions a user's conversations."),
    405: ("method_not_allowed", "Use the method the route takes (see the Allow header)."),
    409: ("conflict", "Use another id (or none, to have one made), or read the one that exists."),
    422: ("invalid_request", "Check the values in the path and the query against docs/http-api.md."),
}


def refused_by_adk(error: HTTPException) -> ApiError:
    detail = printable(str(error.detail))[:300]
    if detail == "There was an error parsing the body":
        return ApiError(400, "invalid_json", "The body is not JSON this server can read: it must be UTF-8, "
                        "and a number may have at most 4,300 digits.", "Send a UTF-8 JSON body and try again.")
    if error.status_code == 404 and detail == "Not Found":  # no route has this path
        return ApiError(404, "not_found", "No route of this server has this path.",
                        "Check the path: docs/http-api.md lists the routes, and the server's /docs page ADK's "
                        "(except in production mode).")
    code, fix = _REFUSALS.get(error.status_code, ("refused", "Check the request against docs/http-api.md."))
    return ApiError(error.status_code, code, detail.rstrip(".") + ".", fix, headers=dict(error.headers or {}))


def install(server: FastAPI) -> None:
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


def invalid_function_response(message: str) -> ApiError:
    return ApiError(
        400, "invalid_function_response", message,
        "Answer only a pending call, with its id: the event whose longRunningToolIds lists it "
        "(GET /apps/{app}/users/{user}/sessions/{session}). Approvals themselves are decided "
        "with POST /api/approvals/{ticket_id}/approve or /reject, not over /run.",
    )


# The names of the errors an SSE run can end with that come from the database.
_DATABASE_ERRORS = ("DBAPIError", "OperationalError", "InterfaceError", "DatabaseError", "DataError",
                    "IntegrityError", "InternalError", "ProgrammingError", "DatabaseFileGone", "OSError",
                    "ConnectionRefusedError", "ConnectionError", "TimeoutError")


def stream_error(error_type: str, message: str) -> ApiError:
    """An error ADK ended an SSE run with, worded as /run words it (never the SQL in its message)."""
    if error_type == "ValueError" and is_resume_refusal(message):
        return invalid_function_response(message)
    if error_type == ModelUnavailable.__name__ and (parts := ModelUnavailable.parts(message)):
        return ApiError(STATUS[ModelUnavailable.code], ModelUnavailable.code, *parts)
    if error_type in _DATABASE_ERRORS or "[SQL:" in message:
        return database_unavailable("POST", "/run_sse", None)
    return ApiError(500, "internal_error", f"The run failed: {printable(error_type)[:80]}.",
                    "Try again; if it persists, the server log has the details.")


def reworded_event(chunk: bytes) -> bytes:
    """ADK's SSE error event (`data: {"error": ..., "error_details": ...}`) as `{error, message, fix}`.

    An event that failed inside the run (`errorCode`, `errorMessage`) keeps its shape, without SQL.
    """
    if chunk.startswith(b"data:") and b'"errorMessage"' in chunk and b'"error_details"' not in chunk:
        try:
            event = json.loads(chunk[len(b"data:"):])
            event["errorMessage"] = without_sql(str(event["errorMessage"]))
        except (ValueError, KeyError, TypeError):
            return chunk
        return f"data: {json.dumps(event)}\n\n".encode()
    if not chunk.startswith(b"data:") or b'"error_details"' not in chunk:
        return chunk
    try:
        event = json.loads(chunk[len(b"data:"):])
        details = event["error_details"]
        answer = stream_error(str(details.get("error_type", "")), str(details.get("error_message", "")))
    except (ValueError, KeyError, TypeError, AttributeError):
        return chunk
    return f"data: {json.dumps(answer.body())}\n\n".encode()
