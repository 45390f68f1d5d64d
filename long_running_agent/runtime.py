"""Durable runtime: an ADK Runner whose sessions live in the ledger's database.

`DatabaseSessionService` keeps every event (including the pending call's id in
`long_running_tool_ids`), so an approval can resume a conversation from any
process, after any restart.
"""

from __future__ import annotations

from google.adk.runners import Runner
from google.adk.sessions import DatabaseSessionService

from .agent import app
from .ledger import create_engine


def session_service(database_url: str) -> DatabaseSessionService:
    # Same engine tuning as the ledger (WAL, busy timeout) for the shared file.
    return DatabaseSessionService(db_engine=create_engine(database_url))


def make_runner(database_url: str) -> Runner:
    return Runner(app=app, session_service=session_service(database_url))
