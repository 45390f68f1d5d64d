"""Database engines, tuned once for the ledger and ADK's session store alike.

Both keep their rows in the same SQLite file or PostgreSQL database, so both
get their connections here: SQLite with WAL and a busy timeout, one connection
per engine so bursts queue in order; PostgreSQL with a checked pool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.adk.sessions import DatabaseSessionService
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets readers run beside a writer; busy_timeout makes concurrent
    # writers (ADK's session store shares this file) wait instead of failing
    # with "database is locked".
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


# Seconds a database call waits for a pooled connection. In a burst (1,000
# approvals at once) calls queue for connections for a minute or more; failing
# one halfway would leave a decided ticket undelivered, so they wait instead.
POOL_TIMEOUT_S = 300


def create_engine(url: str) -> AsyncEngine:
    """An async engine for `url`, with SQLite tuned for concurrent writers."""
    if url.startswith("sqlite"):
        # SQLite has one writer at a time. One connection per engine makes a
        # burst queue in the pool, in order; with many connections the writers
        # poll in SQLite's busy handler and some starve past busy_timeout
        # ("database is locked"). An in-memory database has its own pool.
        pool = (
            {"pool_size": 1, "max_overflow": 0, "pool_timeout": POOL_TIMEOUT_S}
            if _ensure_sqlite_dir(url)
            else {}
        )
        engine = create_async_engine(url, connect_args={"timeout": 30}, **pool)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(
        url, pool_size=20, max_overflow=20, pool_pre_ping=True, pool_timeout=POOL_TIMEOUT_S
    )


def _ensure_sqlite_dir(url: str) -> bool:
    """Create the SQLite file's directory; False for an in-memory database."""
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
        return True
    return False


def session_service(url: str) -> DatabaseSessionService:
    """ADK's session store on `url`, with the same engine tuning as the ledger."""
    return DatabaseSessionService(db_engine=create_engine(url))
