"""Counting what a flow asks of the database: the ledger's round trips and the session store's calls.

A ledger round trip is one visit of the ledger to its database: a connection
checked out of the pool, the statements sent on it (one transaction, or one
read) and the connection checked back in. A visit counts as the ledger's when
one of its statements names a ledger table; ADK's session store visits the
same engine for its own tables. Statements are counted too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from google.adk.sessions import BaseSessionService
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from long_running_agent.ledger.storage.schema import Base

LEDGER_TABLE = re.compile(r"\b(" + "|".join(sorted(Base.metadata.tables)) + r")\b")
SESSION_STORE_METHODS = ("create_session", "get_session", "list_sessions", "delete_session", "append_event")


@dataclass
class Visits:
    """The ledger's visits to the database, each the list of its statements."""

    ledger: list[list[str]] = field(default_factory=list)
    _open: dict[int, list[str]] = field(default_factory=dict)

    @property
    def statements(self) -> int:
        return sum(len(visit) for visit in self.ledger)


@contextmanager
def ledger_visits(engine: AsyncEngine) -> Iterator[Visits]:
    """Count the ledger's visits to `engine`'s database while the block runs."""
    visits = Visits()
    sync = engine.sync_engine

    def checkout(dbapi_connection: Any, *_: Any) -> None:
        visits._open[id(dbapi_connection)] = []

    def checkin(dbapi_connection: Any, *_: Any) -> None:
        sent = visits._open.pop(id(dbapi_connection), [])
        if any(LEDGER_TABLE.search(statement) for statement in sent):
            visits.ledger.append(sent)

    def before_cursor_execute(connection: Any, _cursor: Any, statement: str, *_: Any) -> None:
        visits._open.setdefault(id(connection.connection.dbapi_connection), []).append(statement)

    listeners = [(sync.pool, "checkout", checkout), (sync.pool, "checkin", checkin),
                 (sync, "before_cursor_execute", before_cursor_execute)]
    for target, name, listener in listeners:
        event.listen(target, name, listener)
    try:
        yield visits
    finally:
        for target, name, listener in listeners:
            event.remove(target, name, listener)


@contextmanager
def session_store_calls(service: BaseSessionService) -> Iterator[list[str]]:
    """The names of the session store's methods called on `service` while the block runs."""
    called: list[str] = []
    for name in SESSION_STORE_METHODS:
        method = getattr(service, name)

        def counted(*args: Any, _method: Any = method, _name: str = name, **kwargs: Any) -> Any:
            called.append(_name)
            return _method(*args, **kwargs)

        setattr(service, name, counted)
    try:
        yield called
    finally:
        for name in SESSION_STORE_METHODS:
            delattr(service, name)
