"""Database engines, tuned once for the ledger and ADK's session store alike (they share one: desk.py).

SQLite gets a rollback journal, one connection per engine, a watch on the file (docs/deployment.md) and the sha256
that PostgreSQL has built in; PostgreSQL a pool whose idle connections are pinged before use (benchmarks/README.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, ExceptionContext, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError, NoSuchModuleError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import PoolResetState

from ...refusals.rules import DatabaseFileGone

logger = logging.getLogger(__name__)

# A rollback journal, not WAL, whose mapped `-shm` file crashed a server with SIGBUS (docs/deployment.md);
# mmap_size=0 keeps the database file unmapped too. WAL with locking_mode=EXCLUSIVE would map nothing but
# lock the approver CLI out. TRUNCATE empties the journal where DELETE recreates it on every commit.
SQLITE_JOURNAL_MODE = "truncate"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # Writers in other processes (the CLI, a second server) wait instead of failing with "database is locked".
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA mmap_size=0")
    # WAL is a property of the file, switched only while no other process has it open.
    try:
        cursor.execute(f"PRAGMA journal_mode={SQLITE_JOURNAL_MODE}")
        mode = cursor.fetchone()[0]
    except sqlite3.OperationalError:
        mode = "wal"
    if mode == "wal":
        cursor.execute("PRAGMA database_list")
        logger.warning(
            "The SQLite file %s is in WAL mode and another process has it open, so it stays in WAL "
            "mode (with a -shm file) for now. Stop the processes using it (a server started before "
            "this version), then restart this one to switch it to a rollback journal.",
            cursor.fetchone()[2],
        )
    # With a rollback journal, NORMAL can corrupt the file on a power cut (WAL's NORMAL only loses commits).
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.close()
    # SQLite has no sha256: PostgreSQL's encode(sha256(...), 'hex'), which the audit trail's INSERT hashes each row
    # with (ledger/audit/chain.py).
    dbapi_connection.create_function("sha256_hex", 1, lambda text: hashlib.sha256(text.encode()).hexdigest(),
                                     deterministic=True)


# (st_dev, st_ino) of each SQLite file this process has opened, by absolute path.
_sqlite_files: dict[str, tuple[int, int]] = {}
# Files this process found deleted (False) or replaced (True): it never uses them again.
_gone_files: dict[str, bool] = {}


class _SqliteFileWatch:
    """Stops a process from using a database file that was deleted or replaced under it (docs/deployment.md)."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)

    def before_connect(self, *_args: Any) -> None:
        if self.path in _sqlite_files:
            self.check()  # SQLite would create a new, empty file

    def connected(self, *_args: Any) -> None:
        if self.path not in _sqlite_files:
            found = os.stat(self.path)
            _sqlite_files[self.path] = (found.st_dev, found.st_ino)

    def check(self, *_args: Any) -> None:
        if self.path in _gone_files:
            # Once gone, gone for this process: a file made at the path later may even
            # get the old file's inode number back, once nothing holds the old one open.
            raise DatabaseFileGone(self.path, replaced=_gone_files[self.path])
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            _gone_files[self.path] = False
            raise DatabaseFileGone(self.path, replaced=False) from None
        if (found.st_dev, found.st_ino) != _sqlite_files[self.path]:
            _gone_files[self.path] = True
            raise DatabaseFileGone(self.path, replaced=True)


def sqlite_file(url: str | URL) -> str | None:
    """The path of the SQLite file `url` names; None for PostgreSQL or an in-memory database."""
    url = make_url(url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return url.database


# EXPENSES_DATABASE_URL's default, in the project folder: every command, started anywhere, shares one ledger.
_PROJECT = Path(__file__).resolve().parents[3]
DEFAULT_DATABASE_URL = f"sqlite+aiosqlite:///{_PROJECT / '.data' / 'expenses.db'}"
_SQLITE, _POSTGRES = "sqlite+aiosqlite:///path/expenses.db", "postgresql+asyncpg://user:password@host/database"


def usable_url(url: str) -> str:
    """`url` if it names a database and a driver SQLAlchemy runs on asyncio; else a ValueError saying what to write."""
    try:
        parsed = make_url(url)
        blocking = not parsed.get_dialect().is_async
    except (ArgumentError, NoSuchModuleError):  # the URL is not repeated: it may hold a password
        raise ValueError(f"is not a database URL; set it to e.g. {_SQLITE} or {_POSTGRES}.") from None
    if blocking:  # SQLAlchemy would refuse it only at the first command, in words of its own
        instead = parsed.set(drivername="sqlite+aiosqlite") if parsed.get_backend_name() == "sqlite" else _POSTGRES
        raise ValueError(f"names the blocking driver {parsed.get_driver_name()} and the app runs on asyncio; set it "
                         f"to e.g. {instead}.")
    return url


def _roll_back_if_open(dbapi_connection: Any, _record: Any, state: PoolResetState) -> None:
    """A connection checked in with a transaction open is rolled back; after a commit there is nothing to undo.

    SQLAlchemy's default rolls back every check-in, and through aiosqlite each rollback is a trip to its thread.
    """
    if state.asyncio_safe and dbapi_connection.driver_connection.in_transaction:
        dbapi_connection.rollback()


def _keep_on_cancel(context: ExceptionContext) -> None:
    """A statement cut short by cancellation (a client that hung up) keeps its connection, which then rolls back.

    SQLAlchemy drops a connection interrupted so, right for a network driver whose reply may be half read. aiosqlite
    runs a connection's calls in order on its thread, so the connection stays sound. Dropped, a second connection
    would open beside it while the first finishes the interrupted statement, and Python's sqlite3 keeps a closed
    connection's read lock while the interrupted cursor lives: every commit would wait out busy_timeout, then fail.
    """
    if isinstance(context.original_exception, asyncio.CancelledError):
        context.is_disconnect = False


def tune_sqlite(engine: AsyncEngine) -> None:
    """The pragmas above on each new connection, and the file watch for a SQLite file."""
    event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    path = sqlite_file(engine.url)
    if path is not None:
        watch = _SqliteFileWatch(path)
        event.listen(engine.sync_engine, "do_connect", watch.before_connect)
        event.listen(engine.sync_engine, "connect", watch.connected)
        event.listen(engine.sync_engine, "checkout", watch.check)


# A pooled connection used this recently is taken as alive: HikariCP's "alive bypass window" (500 ms there);
# a flow checks out a connection some 17 times in a few tens of milliseconds (benchmarks/README.md).
PING_AFTER_IDLE_S = 1.0


def ping_when_idle(engine: AsyncEngine) -> None:
    """Ping a pooled connection on checkout only if it sat idle for more than PING_AFTER_IDLE_S."""
    dialect = engine.dialect

    def checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.get("checked_in_at")
        if idle_since is not None and time.monotonic() - idle_since < PING_AFTER_IDLE_S:
            return
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as error:
            if dialect.is_disconnect(error, dbapi_connection, None):
                # The pool drops this connection and checks out another (a new one if need be).
                raise DisconnectionError(str(error)) from error
            raise

    def checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info["checked_in_at"] = time.monotonic()

    event.listen(engine.sync_engine, "checkout", checkout)
    event.listen(engine.sync_engine, "checkin", checkin)


# Seconds to wait for a pooled connection: in a burst of 1,000 approvals calls queue for a minute or more, and
# failing one halfway would leave a decided ticket undelivered.
POOL_TIMEOUT_S = 300


def create_engine(url: str) -> AsyncEngine:
    """An async engine for `url`, with SQLite tuned for concurrent writers."""
    if url.startswith("sqlite"):
        # One writer at a time: with one connection a burst queues in the pool, in order; with many the writers
        # poll in SQLite's busy handler and some starve past busy_timeout. An in-memory database has its own pool.
        path = sqlite_file(url)
        pool: dict[str, Any] = {}
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            pool = {"pool_size": 1, "max_overflow": 0, "pool_timeout": POOL_TIMEOUT_S}
        engine = create_async_engine(url, connect_args={"timeout": 30}, pool_reset_on_return=None, **pool)
        event.listen(engine.sync_engine, "reset", _roll_back_if_open)
        event.listen(engine.sync_engine, "handle_error", _keep_on_cancel)
        tune_sqlite(engine)
        return engine
    engine = create_async_engine(url, pool_size=20, max_overflow=20, pool_timeout=POOL_TIMEOUT_S)
    ping_when_idle(engine)
    return engine


def database_in_words(url: str) -> str:
    """The database URL as main.py and `make web` print it: no password, a SQLite file in the project relative to it."""
    parsed = make_url(url)
    path = Path(parsed.database or "")
    if parsed.get_backend_name() == "sqlite" and path.is_absolute() and path.is_relative_to(_PROJECT):
        parsed = parsed.set(database=str(path.relative_to(_PROJECT)))
    return parsed.render_as_string(hide_password=True)
