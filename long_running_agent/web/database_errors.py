"""A failure of the database, classified: the request's data, a conflict, or the database itself.

Never worded with the driver's message: SQLAlchemy's carries the SQL statement and its parameters.
"""

from __future__ import annotations

import logging
import sqlite3

from fastapi import Request
from sqlalchemy.exc import DBAPIError, IntegrityError

from ..error_text import causes
from ..ledger.inputs import MAX_ID
from ..refusals.rules import DatabaseFileGone
from .api_errors import ApiError, refusal_error

logger = logging.getLogger(__name__)


def database_unavailable(method: str, ticket: str | None) -> ApiError:
    if method == "POST" and ticket:
        message = (f"The database is unavailable, so this server cannot tell whether the decision on {ticket} "
                   "was recorded.")
        fix = f"When GET /health answers ok again, check GET /api/approvals/{ticket} and repeat only what is missing."
    else:
        message = "The database is unavailable; nothing was changed by this request."
        fix = "Try again when GET /health answers ok."
    return ApiError(503, "database_unavailable", message, fix, headers={"Retry-After": "5"})


def database_failure(error: BaseException) -> BaseException | None:
    kinds = (DBAPIError, sqlite3.Error, OSError, DatabaseFileGone)
    return next((cause for cause in causes(error) if isinstance(cause, kinds)), None)


# PostgreSQL's SQLSTATE classes for a value the database refuses to store: 22 data exception (too long, NUL, bad
# encoding), 54 program limit exceeded; and the codes that say which.
_BAD_VALUE_CLASSES = ("22", "54")
_BAD_VALUE_MESSAGES = {
    "22001": f"a value is longer than the database stores (ids have at most {MAX_ID} characters)",
    "22021": "a text has a NUL character (\\u0000) or bytes that are not UTF-8",
    "22P05": "a text has a NUL character (\\u0000), which the database cannot store",
}


def bad_value(error: BaseException) -> str | None:
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
    """A failure in the database, worded by its cause (ADK wraps some errors): the data, a conflict, or an outage."""
    gone = next((cause for cause in causes(error) if isinstance(cause, DatabaseFileGone)), None)
    if gone is not None:  # nothing here works again until a restart
        logger.error("%s Restart the server (docs/deployment.md, \"The SQLite file\").", gone)
        return refusal_error(gone)
    logger.warning("Database error on %s %s: %s", method, path, database_failure(error) or error)
    if (why := bad_value(error)) is not None:
        return ApiError(422, "invalid_value", f"The request was refused: {why}. Nothing was stored.",
                        f"Remove NUL characters (\\u0000), keep ids to at most {MAX_ID} characters, and send it again.")
    if any(isinstance(cause, (IntegrityError, sqlite3.IntegrityError)) for cause in causes(error)):
        return ApiError(409, "conflict", "The request conflicts with what is stored: something with the same "
                        "id exists.", "Use another id (or none, to have one made), or read the one that exists.")
    return database_unavailable(method, ticket)


def request_database_error(request: Request, error: BaseException) -> ApiError:
    return database_error(error, request.method, request.url.path, request.path_params.get("ticket_id"))
