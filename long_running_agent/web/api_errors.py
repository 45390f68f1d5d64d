"""The approvals API's answer when something is refused: JSON `{error, message, fix}`, with its status code.

The domain's refusals are defined once (refusals/); here each gets its status code, and its next step as a route.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi.exceptions import RequestValidationError, WebSocketRequestValidationError
from fastapi.responses import JSONResponse

from ..ledger.inputs import printable
from ..refusals import Actions, Refusal


class ApiError(Exception):
    """An answer that is not a success, as a JSON body."""

    def __init__(self, status: int, error: str, message: str, fix: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.error, self.message, self.fix = status, error, message, fix
        self.headers = dict(headers or {})
        if status == 401:
            self.headers["WWW-Authenticate"] = "Bearer"

    def body(self) -> dict[str, str]:
        return {"error": self.error, "message": self.message, "fix": self.fix}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers or None)


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

STATUS = {
    "ticket_not_found": 404, "not_allowed": 403, "not_requester": 403, "not_an_approver": 403, "not_in_group": 403,
    "database_file_gone": 503, "schema_behind": 503, "schema_ahead": 503, "schema_mismatch": 503, "schema_error": 503,
    "invalid_input": 422, "invalid_body": 422, "reason_required": 422, "invalid_amount": 422,
    "conversation_unreachable": 502, "delivery_failed": 502, "conversation_missing": 410,
    "model_unavailable": 502,
}


def refusal_error(refusal: Refusal) -> ApiError:
    retry_after = getattr(refusal, "retry_after", None)  # a conversation busy for a while (refusals/answers.py)
    return ApiError(STATUS.get(refusal.code, 409), refusal.code, refusal.message, refusal.next_for(API),
                    headers={"Retry-After": str(int(retry_after.total_seconds()))} if retry_after else None)


def problems(errors: Sequence[Any], within: str | None = None) -> str:
    """FastAPI's validation errors in one line: each field's path (within `within`, e.g. "body") and its error."""
    def where(location: Sequence[Any]) -> str:
        inside = location[1:] if within else location
        return ".".join(str(part) for part in inside) or within or "request"

    return "; ".join("body: not valid JSON" if e["type"] == "json_invalid" else f"{where(e['loc'])}: {e['msg']}"
                     for e in errors)


def invalid_request(error: RequestValidationError | WebSocketRequestValidationError) -> ApiError:
    """FastAPI's validation of one of ADK's routes (a field missing or of the wrong type), as JSON."""
    return ApiError(422, "invalid_request", f"The request is not valid: {printable(problems(error.errors()))[:500]}.",
                    "Send the fields the route takes, with their types (docs/http-api.md shows /run and the session "
                    "routes; the server's /docs page lists every route's, except in production mode).")


def unexpected_error(error: BaseException) -> ApiError:
    return ApiError(500, "internal_error", f"The server failed while answering: {type(error).__name__}. Nothing was "
                    "changed by this answer unless GET /api/approvals/{id} shows it.",
                    "Try again; if it persists, the server log has the details.")
