"""Where a ticket's conversation lives, so a decision can reach it from any process.

Each surface keeps ADK sessions in its own store (docs/deployment.md#where-conversations-live); a ticket records
its store's locator: `app` (the app's database), `sqlite:/abs/session.db` (an ADK SqliteSessionService file),
`database:<url>` (no password stored) or `memory:<process>:<id>` (one process's memory, unreachable from others).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING

from google.adk.agents.invocation_context import InvocationContext
from google.adk.cli.utils.local_storage import PerAgentDatabaseSessionService
from google.adk.sessions import BaseSessionService, DatabaseSessionService, InMemorySessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..adk_compat import STORED_SESSION_VERSION, in_memory_version, per_agent_store, sqlite_file
from ..ledger import Conversation, Ledger
from ..ledger.storage.locks import new_holder
from ..names import APP_STORE, store_in_words
from ..refusals.answers import ConversationInUse

if TYPE_CHECKING:
    from ..desk import Desk

# In-memory stores this process wrote tickets from: only it can reach them.
_in_memory: weakref.WeakValueDictionary[int, InMemorySessionService] = weakref.WeakValueDictionary()


@dataclass(frozen=True)
class Unreachable(Exception):
    """The conversation's store cannot be opened from this process."""

    where: str
    why: str

    def __str__(self) -> str:
        return f"{self.why} ({self.where})"


def _without_password(url: URL) -> URL:
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        url = url.set(database=os.path.abspath(url.database))
    return url.set(password=None)


def same_database(a: str | URL, b: str | URL) -> bool:
    return _without_password(make_url(a)) == _without_password(make_url(b))


class GuardedSessionService(DatabaseSessionService):
    """ADK's session store that refuses to delete a conversation an approval still needs."""

    def __init__(self, db_engine: AsyncEngine, ledger: Callable[[], Ledger]) -> None:
        """`ledger`: the desk's, asked once the server's loop runs."""
        super().__init__(db_engine=db_engine)
        self._ledger = ledger

    async def delete_session(self, app_name: str, user_id: str, session_id: str) -> None:
        waiting = await self._ledger().deliveries.open_in(Conversation(app_name, user_id, session_id))
        if waiting:
            raise ConversationInUse([t.id for t in waiting])
        await super().delete_session(app_name=app_name, user_id=user_id, session_id=session_id)


async def locate(service: BaseSessionService, *, app_name: str, app_database_url: str) -> str:
    """The locator of the store `service` writes this app's sessions to."""
    if isinstance(service, PerAgentDatabaseSessionService):
        # Plain `adk web` / `adk run`: ADK routes each app to a SqliteSessionService of its own.
        store = await per_agent_store(service, app_name)
        if isinstance(store, Path):
            return "sqlite:" + str(store)
        service = store
    if isinstance(service, DatabaseSessionService):
        url = service.db_engine.url
        if same_database(url, app_database_url):
            return APP_STORE
        return "database:" + _without_password(url).render_as_string(hide_password=False)
    if isinstance(service, SqliteSessionService) and (path := sqlite_file(service)) is not None:
        return "sqlite:" + os.path.abspath(path)
    if isinstance(service, InMemorySessionService):
        _in_memory[id(service)] = service
        return f"memory:{new_holder().rsplit(':', 1)[0]}:{id(service)}"
    return f"unknown:{type(service).__name__}"


def open_store(desk: Desk, locator: str) -> BaseSessionService:
    """A session service for the store named by `locator`; raises Unreachable."""
    kind, _, where = locator.partition(":")
    if kind == APP_STORE:
        return desk.sessions
    if kind == "sqlite":
        if not os.path.exists(where):
            raise Unreachable(where, "the session file no longer exists")
        return SqliteSessionService(where)
    if kind == "database":
        # The password is not stored with the ticket; it is the app's own
        # database under another name, or a database that needs none.
        url = desk.settings.database_url if same_database(where, desk.settings.database_url) else where
        return desk.sessions_at(url)
    if kind == "memory":
        process, _, key = where.rpartition(":")
        service = _in_memory.get(int(key)) if key.isdigit() else None
        if service is not None and process == new_holder().rsplit(":", 1)[0]:
            return service  # this very process keeps it
        raise Unreachable(
            store_in_words(locator),
            "the conversation is kept in the memory of the process that started it; "
            "no other process can reach it",
        )
    raise Unreachable(store_in_words(locator), "this process does not know that kind of session store")


def conversation_of(context: InvocationContext) -> Conversation:
    return Conversation(context.session.app_name, context.session.user_id, context.session.id)


def session_version(context: InvocationContext, ledger: Ledger,
                    ) -> Callable[[AsyncConnection], Awaitable[float | None]] | None:
    """A read of the stored session's version, for the transaction that takes the lock; None: always reload.

    It is what ADK's stale-session check compares: `update_time` in the ledger's database, `last_update_time` in memory.
    """
    service, session = context.session_service, context.session
    if isinstance(service, InMemorySessionService):
        async def in_memory(_db: AsyncConnection) -> float | None:
            return in_memory_version(service, session.app_name, session.user_id, session.id)

        return in_memory
    if (not isinstance(service, DatabaseSessionService) or service.db_engine is not ledger.engine
            or STORED_SESSION_VERSION is None):
        return None
    query = STORED_SESSION_VERSION

    async def read(db: AsyncConnection) -> float | None:
        stored = await db.scalar(query, {"app_name": session.app_name, "user_id": session.user_id,
                                         "session_id": session.id})
        if stored is None:
            return None
        return (stored if stored.tzinfo else stored.replace(tzinfo=UTC)).timestamp()

    return read


async def refresh(context: InvocationContext) -> None:
    """Load the conversation again: ADK loaded it before the lock, and appending to a stale copy fails."""
    fresh = await context.session_service.get_session(
        app_name=context.session.app_name, user_id=context.session.user_id, session_id=context.session.id
    )
    if fresh is not None:
        context.session = fresh
