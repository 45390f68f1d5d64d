"""ADK's and FastAPI's own texts of a refusal, as this server's JSON `{error, message, fix}`.

ADK answers some requests before any route of this app runs: its origin and DNS-rebinding checks (plain-text 403s),
a refused WebSocket handshake, a message that cannot resume a call (a plain-text 500 on /run, an error event on
/run_sse). Each is recognised by ADK's words (adk_compat.py keeps the ones it relies on).
"""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException

from ..adk_compat import is_resume_refusal
from ..error_text import without_sql
from ..ledger.inputs import printable
from ..refusals.model import ModelUnavailable
from .api_errors import STATUS, ApiError, unexpected_error
from .database_errors import database_unavailable

# ADK's origin check (google/adk/cli/api_server.py): plain-text answers, and a /run_live handshake's close reasons.
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
    if forbidden := _ADK_FORBIDDEN.get(said.removeprefix("Forbidden:").strip().lower()):
        return ApiError(status, *forbidden)
    if status >= 500:
        return unexpected_error(RuntimeError(said))
    return ApiError(status, "refused", f"{said[:300].rstrip('.') or 'Refused'}.",
                    "Check the request against docs/http-api.md.")


def handshake_refused(reason: str) -> ApiError:
    """A WebSocket handshake closed before it was accepted (ADK's /run_live checks), as a JSON 403."""
    said = printable(reason).strip()
    if forbidden := _ADK_FORBIDDEN.get(said.lower()):
        return ApiError(403, *forbidden)
    return ApiError(403, "websocket_refused", f"The WebSocket handshake was refused: {said[:300] or 'no reason'}.",
                    "Open /run_live with app_name, user_id and session_id in the query string, for a session "
                    "that exists (POST /apps/{app}/users/{user}/sessions).")


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


def invalid_function_response(message: str) -> ApiError:
    return ApiError(400, "invalid_function_response", message,
                    "Answer only a pending call, with its id: the event whose longRunningToolIds lists it (GET "
                    "/apps/{app}/users/{user}/sessions/{session}). Approvals themselves are decided with POST "
                    "/api/approvals/{ticket_id}/approve or /reject, not over /run.")


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
        return database_unavailable("POST", None)
    return ApiError(500, "internal_error", f"The run failed: {printable(error_type)[:80]}.",
                    "Try again; if it persists, the server log has the details.")


def reworded_event(chunk: bytes) -> bytes:
    """ADK's SSE error event (`error_details`) as `{error, message, fix}`; a run's own (`errorMessage`), without SQL."""
    if not chunk.startswith(b"data:") or (b'"error_details"' not in chunk and b'"errorMessage"' not in chunk):
        return chunk
    try:
        event = json.loads(chunk[len(b"data:"):])
        if b'"error_details"' in chunk:
            details = event["error_details"]
            event = stream_error(str(details.get("error_type", "")), str(details.get("error_message", ""))).body()
        else:
            event["errorMessage"] = without_sql(str(event["errorMessage"]))
    except (ValueError, KeyError, TypeError, AttributeError):
        return chunk
    return f"data: {json.dumps(event)}\n\n".encode()

