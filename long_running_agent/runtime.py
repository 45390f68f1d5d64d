"""Durable runtime: ADK Runners whose sessions outlive the process.

`DatabaseSessionService` keeps every event (including the pending call's id in
`long_running_tool_ids`), so an approval can resume a conversation from any
process, after any restart. Engines belong to one event loop, so what is
shared is kept per loop, like the ledgers.
"""

from __future__ import annotations

import asyncio
import weakref

from google.adk.apps import App
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, DatabaseSessionService

from .ledger import close_ledgers, create_engine

_shared: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, DatabaseSessionService]] = (
    weakref.WeakKeyDictionary()
)


def session_service(database_url: str) -> DatabaseSessionService:
    """The running loop's session service for `database_url`, shared by its users."""
    per_loop = _shared.setdefault(asyncio.get_running_loop(), {})
    if database_url not in per_loop:
        per_loop[database_url] = new_session_service(database_url)
    return per_loop[database_url]


class ConversationInUse(Exception):
    """A conversation with an open ticket cannot be deleted: its decision must reach it."""

    def __init__(self, ticket_ids: list[str]) -> None:
        self.ticket_ids = ticket_ids
        super().__init__(f"the conversation still waits for {', '.join(ticket_ids)}")


class GuardedSessionService(DatabaseSessionService):
    """ADK's session store that refuses to delete a conversation an approval still needs."""

    def __init__(self, database_url: str) -> None:
        super().__init__(db_engine=create_engine(database_url))
        self.database_url = database_url

    async def delete_session(self, app_name: str, user_id: str, session_id: str) -> None:
        from .ledger import get_ledger
        from .locks import Conversation

        open_tickets = await get_ledger(self.database_url).open_in(Conversation(app_name, user_id, session_id))
        if open_tickets:
            raise ConversationInUse([t.id for t in open_tickets])
        await super().delete_session(app_name=app_name, user_id=user_id, session_id=session_id)


def adopt_session_service(database_url: str, service: DatabaseSessionService) -> None:
    """Use `service` for `database_url` in the running loop (a server shares its own)."""
    _shared.setdefault(asyncio.get_running_loop(), {})[database_url] = service


def new_session_service(database_url: str) -> DatabaseSessionService:
    # Same engine tuning as the ledger (WAL, busy timeout) for the shared file.
    return DatabaseSessionService(db_engine=create_engine(database_url))


def runner_for(sessions: BaseSessionService, app: App | None = None) -> Runner:
    """A runner of `app` (default: the shipped one) on `sessions`."""
    if app is None:
        from .agent import app
    return Runner(app=app, session_service=sessions)


def make_runner(database_url: str) -> Runner:
    """A runner with its own engine on `database_url`, as a separate process would have."""
    return runner_for(new_session_service(database_url))


async def close_runtime() -> None:
    """Dispose the running loop's engines (end of a test, a command or a server)."""
    for service in _shared.pop(asyncio.get_running_loop(), {}).values():
        await service.db_engine.dispose()
    await close_ledgers()
