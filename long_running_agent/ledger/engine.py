"""Database engines, tuned once for the ledger and ADK's session store alike.

Both keep their rows in the same SQLite file or PostgreSQL database, so both
get their connections here: SQLite with a rollback journal and a busy
timeout, one connection per engine so bursts queue in order, and a watch on
the file; PostgreSQL with a pool whose idle connections are checked before
use. In a process, the ledger and ADK's sessions share one engine (desk.py).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from ..refusals.rules import DatabaseFileGone

logger = logging.getLogger(__name__)

# A rollback journal, not WAL. In WAL mode every process maps the `-shm`
# file into memory, and a `-shm` truncated or made immutable (chattr +i)
# under a running server killed it with SIGBUS, logging nothing. A rollback
# journal needs no shared memory, and mmap_size=0 keeps the database file
# itself unmapped. WAL with locking_mode=EXCLUSIVE keeps its index on the
# heap but locks the approver CLI out of the file. TRUNCATE empties the
# journal where DELETE removes and recreates it on every commit. The cost
# (benchmarks/README.md) stays small only with one engine per database in a
# process: see desk.py.
SQLITE_JOURNAL_MODE = "truncate"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # busy_timeout makes concurrent writers (other processes: the CLI, a
    # second server) wait instead of failing with "database is locked".
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA mmap_size=0")
    # WAL is a property of the file: a file written by an older version stays
    # in WAL mode until a connection switches it, which SQLite allows only
    # while no other process has the file open.
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
    # FULL is SQLite's default for a rollback journal: with NORMAL, a power
    # cut at the wrong moment can corrupt the file (WAL's NORMAL only loses
    # the last commits).
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.close()


# (st_dev, st_ino) of each SQLite file this process has opened, by absolute path.
_sqlite_files: dict[str, tuple[int, int]] = {}
# Files this process found deleted (False) or replaced (True): it never uses them again.
_gone_files: dict[str, bool] = {}


class _SqliteFileWatch:
    """Stops a process from using a database file that was deleted or replaced under it.

    A deleted file lives on for the processes that have it open: a server
    would go on writing to it while a new CLI process creates a fresh file at
    the same path, each on its own data. So the file's identity is noted on
    the first connection, and each pool checkout (one stat) checks that the
    path still names that file; nothing reconnects to a file that is gone.
    """

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


def tune_sqlite(engine: AsyncEngine) -> None:
    """The pragmas above on each new connection, and the file watch for a SQLite file."""
    event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    path = sqlite_file(engine.url)
    if path is not None:
        watch = _SqliteFileWatch(path)
        event.listen(engine.sync_engine, "do_connect", watch.before_connect)
        event.listen(engine.sync_engine, "connect", watch.connected)
        event.listen(engine.sync_engine, "checkout", watch.check)


# A pooled PostgreSQL connection used this recently is taken as alive; one idle longer is pinged
# before use, and replaced if the server dropped it (a restart, a failover, an idle timeout).
# HikariCP's "alive bypass window" (500 ms there): a flow checks out a connection some 17 times
# in a few tens of milliseconds, and a ping before each was as many extra round trips.
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
        path = sqlite_file(url)
        pool: dict[str, Any] = {}
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            pool = {"pool_size": 1, "max_overflow": 0, "pool_timeout": POOL_TIMEOUT_S}
        engine = create_async_engine(url, connect_args={"timeout": 30}, **pool)
        tune_sqlite(engine)
        return engine
    engine = create_async_engine(url, pool_size=20, max_overflow=20, pool_timeout=POOL_TIMEOUT_S)
    ping_when_idle(engine)
    return engine

