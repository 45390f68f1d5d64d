"""ADK's SQL session store for plain `adk web` / `adk api_server` given a database URL.

Under `make web` a gate and a JSON error layer stand in front of ADK's routes
(web/gate.py, web/errors.py). Under plain `adk` commands nothing of ours
does: ADK answers its create-session route's failures as a 500 whose detail
is the error's text, which for SQLAlchemy holds the SQL statement and its
parameters, and PostgreSQL refuses NUL characters and ids longer than its
columns. The project folder's `services.py` (ADK's hook for registering
session stores) makes ADK use this store for `--session_service_uri` with a
SQLAlchemy URL, so that there:

- ids and state the tables cannot hold are refused before the database sees
  them: creating such a session is ADK's 400; reading, listing or deleting
  one finds nothing (no such session can exist);
- an error of the database reaches ADK, and so its answers, without SQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from google.adk.events import Event
from google.adk.sessions import DatabaseSessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
from sqlalchemy.exc import DBAPIError

from .ledger.engine import create_engine
from .ledger.inputs import MAX_ID, unstorable

# PostgreSQL's SQLSTATE classes for a value it refuses: 22 data exception, 54 program limit.
_BAD_VALUE_CLASSES = ("22", "54")


class SessionStoreError(Exception):
    """The database behind the session store failed; the text says so without its SQL."""


def _unstorable_ids(**ids: str | None) -> str | None:
    for field, value in ids.items():
        if value is None:
            continue
        if unstorable(value):
            return f"The {field} has a NUL character (\\u0000) or text that is not Unicode; remove it."
        if len(value) > MAX_ID:
            return f"The {field} has {len(value)} characters; at most {MAX_ID} are stored."
    return None


def _unstorable_text(field: str, value: Any) -> str | None:
    if unstorable(value) is None:
        return None
    return f"The {field} has a NUL character (\\u0000) or text that is not Unicode, which the database cannot store."


@contextmanager
def _without_sql() -> Iterator[None]:
    """Database errors as ADK words them to clients, without the SQL SQLAlchemy puts in them."""
    try:
        yield
    except DBAPIError as error:
        code = getattr(error.orig, "sqlstate", None)
        if isinstance(code, str) and code[:2] in _BAD_VALUE_CLASSES:
            # ADK answers a ValueError from its store as a 400.
            raise ValueError("The database refused a value of this request: remove NUL characters (\\u0000) "
                             f"and keep ids to at most {MAX_ID} characters.") from error
        raise SessionStoreError(f"The session database failed ({type(error.orig).__name__}); "
                                "nothing was changed. Try again when it is back.") from error


class CheckedSessionService(DatabaseSessionService):
    """ADK's DatabaseSessionService that refuses what its tables cannot hold, and fails without SQL."""

    async def create_session(
        self, *, app_name: str, user_id: str, state: dict[str, Any] | None = None, session_id: str | None = None,
    ) -> Session:
        problem = _unstorable_ids(app_name=app_name, user_id=user_id, session_id=session_id) or (
            _unstorable_text("state", state) if state else None)
        if problem:
            raise ValueError(problem)
        with _without_sql():
            return await super().create_session(app_name=app_name, user_id=user_id, state=state,
                                                session_id=session_id)

    async def get_session(
        self, *, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None,
    ) -> Session | None:
        if _unstorable_ids(app_name=app_name, user_id=user_id, session_id=session_id):
            return None
        with _without_sql():
            return await super().get_session(app_name=app_name, user_id=user_id, session_id=session_id,
                                             config=config)

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        if _unstorable_ids(app_name=app_name, user_id=user_id):
            return ListSessionsResponse(sessions=[])
        with _without_sql():
            return await super().list_sessions(app_name=app_name, user_id=user_id)

    async def delete_session(self, app_name: str, user_id: str, session_id: str) -> None:
        if _unstorable_ids(app_name=app_name, user_id=user_id, session_id=session_id):
            return
        with _without_sql():
            await super().delete_session(app_name=app_name, user_id=user_id, session_id=session_id)

    async def append_event(self, session: Session, event: Event) -> Event:
        problem = _unstorable_text("message", event.model_dump(mode="json", exclude_none=True))
        if problem:
            raise ValueError(problem)
        with _without_sql():
            return await super().append_event(session, event)


def checked_sessions(uri: str, **_options: Any) -> CheckedSessionService:
    """ADK's service-registry factory: the store for `uri`, on the app's tuned engine settings."""
    return CheckedSessionService(db_engine=create_engine(uri))
