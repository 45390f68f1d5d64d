"""The database at the schema this code needs: Alembic migrations, one process at a time (docs/deployment.md).

Each upgrade is one transaction. Processes that start together take turns on a start-up lock (a PostgreSQL advisory
lock, or a lock file beside a SQLite file) while the ledger is migrated and ADK's session tables are created. A new
database gets this code's tables in one step, without Alembic, which takes longer to import than the demo takes to run
(benchmarks/README.md); tests/test_migrations.py checks that it is the database the migrations build.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import os
import re
from collections.abc import AsyncIterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table, event, inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from ...names import EXPENSES
from ...refusals.startup import SchemaAhead, SchemaError, SchemaMismatch
from .engine import sqlite_file, tune_sqlite
from .schema import Base

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
# Any fixed number: the key of this app's advisory lock on PostgreSQL.
ADVISORY_LOCK_KEY = 2_024_113_001


def config() -> Config:
    from alembic.config import Config  # Alembic is imported only to change a schema

    cfg = Config(str(MIGRATIONS / "alembic.ini"))
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


_REVISION = re.compile(r"^(down_revision|revision)\b[^=]*=\s*(?:None|[\"']([^\"']+)[\"'])", re.MULTILINE)


def _revisions() -> dict[str, str | None]:
    """Each revision of ledger/migrations/versions/ and the one it follows, read as text: Alembic is slow to import."""
    return _revisions_in(MIGRATIONS)


@functools.cache  # read once per process: every start of a desk and every check of a database asks
def _revisions_in(migrations: Path) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for script in sorted((migrations / "versions").glob("*.py")):
        names = {name: value for name, value in _REVISION.findall(script.read_text())}
        if "revision" in names:
            found[names["revision"]] = names.get("down_revision") or None
    return found


def head() -> str:
    revisions = _revisions()
    [revision] = set(revisions) - set(revisions.values())
    return revision


def _current(connection: Connection) -> str | None:
    """The database's schema revision; SchemaAhead for one this version does not know."""
    heads = (sorted(row[0] for row in connection.execute(text("SELECT version_num FROM alembic_version")))
             if inspect(connection).has_table("alembic_version") else [])
    if len(heads) > 1:
        raise SchemaError(None, head(), (
            f"The database's alembic_version table names several schema revisions ({', '.join(sorted(heads))}); "
            f"this version needs one, {head()}. It was changed by hand."),
            next_step="Restore a backup, or keep the one row that names the revision the tables are at, then run: "
                      f"{EXPENSES} migrate")
    revision = heads[0] if heads else None
    if revision is None and inspect(connection).has_table("approval_tickets"):
        return "0001"  # made by release 0.1, which created its tables itself
    if revision is not None and revision not in _revisions():
        raise SchemaAhead(revision, head())
    if revision == head():
        # At this code's revision, every table it declares is there: one dropped by hand
        # would otherwise surface as a raw database error in the middle of a request.
        missing = sorted(set(Base.metadata.tables) - set(inspect(connection).get_table_names()))
        if missing:
            raise SchemaMismatch(revision, revision, f"no table {', '.join(missing)}")
    return revision


def _upgrade(connection: Connection) -> tuple[str | None, str]:
    found = _current(connection)
    if found is None:
        _create_at_head(connection)
        return None, head()
    from alembic import command
    from alembic.runtime.migration import MigrationContext

    cfg = config()
    cfg.attributes["connection"] = connection
    before = MigrationContext.configure(connection).get_current_revision()
    try:
        if found is not None and found != before:
            command.stamp(cfg, found)  # mark release 0.1's tables as what they are
        command.upgrade(cfg, "head")
    except DBAPIError as error:
        if error.connection_invalidated:
            raise  # the database went away: an outage, not a schema problem
        # The transaction is rolled back as this leaves it: nothing was changed.
        raise SchemaMismatch(found, head(), _driver_message(error)) from error
    return found, head()


# Migration 0007's counter of pending tickets, as its triggers keep it (the migration keeps its own copy: history).
_SQLITE_ADD = ("INSERT INTO pending_counts (shard, pending) VALUES (0, {delta}) "
               "ON CONFLICT (shard) DO UPDATE SET pending = pending + excluded.pending;")
_MOVED = "CASE WHEN NEW.status = 'pending' THEN 1 ELSE -1 END"
_SQLITE_COUNT = (
    "CREATE TRIGGER pending_count_insert AFTER INSERT ON approval_tickets WHEN NEW.status = 'pending' "
    f"BEGIN {_SQLITE_ADD.format(delta=1)} END",
    "CREATE TRIGGER pending_count_update AFTER UPDATE OF status ON approval_tickets "
    "WHEN (OLD.status = 'pending') <> (NEW.status = 'pending') "
    f"BEGIN {_SQLITE_ADD.format(delta=_MOVED)} END",
    "CREATE TRIGGER pending_count_delete AFTER DELETE ON approval_tickets WHEN OLD.status = 'pending' "
    f"BEGIN {_SQLITE_ADD.format(delta=-1)} END",
)
_POSTGRESQL_COUNT = (
    """
CREATE FUNCTION count_pending_tickets() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    delta bigint := 0;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        delta := delta + (SELECT count(*) FROM added WHERE status = 'pending');
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        delta := delta - (SELECT count(*) FROM removed WHERE status = 'pending');
    END IF;
    IF delta <> 0 THEN
        INSERT INTO pending_counts (shard, pending) VALUES (floor(random() * 16)::int, delta)
        ON CONFLICT (shard) DO UPDATE SET pending = pending_counts.pending + excluded.pending;
    END IF;
    RETURN NULL;
END $$
""",
    "CREATE TRIGGER pending_count_insert AFTER INSERT ON approval_tickets "
    "REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION count_pending_tickets()",
    "CREATE TRIGGER pending_count_update AFTER UPDATE ON approval_tickets "
    "REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION count_pending_tickets()",
    "CREATE TRIGGER pending_count_delete AFTER DELETE ON approval_tickets "
    "REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION count_pending_tickets()",
)


# Migration 0010's trigger that moves a ticket's audit head with each audit row added (its own copy too).
_SQLITE_AUDIT_HEAD = ("CREATE TRIGGER audit_chain_head AFTER INSERT ON approval_audit "
                      "BEGIN UPDATE approval_tickets SET audit_seq = NEW.seq, audit_head = NEW.hash "
                      "WHERE id = NEW.ticket_id; END",)
_POSTGRESQL_AUDIT_HEAD = (
    """
CREATE FUNCTION move_audit_head() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE approval_tickets SET audit_seq = NEW.seq, audit_head = NEW.hash WHERE id = NEW.ticket_id;
    RETURN NULL;
END $$
""",
    "CREATE TRIGGER audit_chain_head AFTER INSERT ON approval_audit FOR EACH ROW EXECUTE FUNCTION move_audit_head()",
)


def _create_at_head(connection: Connection) -> None:
    """A database with no ledger yet: schema.py's tables, 0007's counter and 0010's audit head, stamped at head."""
    Base.metadata.create_all(connection)
    connection.exec_driver_sql("INSERT INTO pending_counts (shard, pending) VALUES (0, 0)")
    count, audit_head = ((_POSTGRESQL_COUNT, _POSTGRESQL_AUDIT_HEAD) if connection.dialect.name == "postgresql"
                         else (_SQLITE_COUNT, _SQLITE_AUDIT_HEAD))
    for statement in (*count, *audit_head):
        connection.exec_driver_sql(statement)
    version = Table("alembic_version", MetaData(), Column("version_num", String(32), nullable=False),
                    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"))
    version.create(connection, checkfirst=True)
    connection.execute(version.insert().values(version_num=head()))


def _driver_message(error: DBAPIError) -> str:
    """What the database said, without the statement: "duplicate column name: approvals_needed"."""
    lines = str(error.orig).strip().splitlines()
    said = lines[0] if lines else type(error.orig).__name__
    # asyncpg's errors come wrapped as "<class 'asyncpg.exceptions.DuplicateColumnError'>: column ..."
    if said.startswith("<class ") and ">: " in said:
        said = said.split(">: ", 1)[1]
    return said


async def current(engine: AsyncEngine) -> str | None:
    async with engine.connect() as connection:
        return await connection.run_sync(_current)


async def migrate(engine: AsyncEngine) -> tuple[str | None, str]:
    """Upgrade the ledger's tables to this code's schema, in one transaction; returns (from, to)."""
    async with startup_lock(engine):
        migrating = _transactional(engine)
        try:
            async with migrating.begin() as connection:
                return await connection.run_sync(_upgrade)
        finally:
            if migrating is not engine:
                await migrating.dispose()


def _transactional(engine: AsyncEngine) -> AsyncEngine:
    """An engine whose transactions hold DDL too: on SQLite, a separate one that says BEGIN itself.

    Python's sqlite3 driver begins only before INSERT, UPDATE or DELETE, so a CREATE would commit at once.
    SQLAlchemy's documented remedy: the driver begins nothing and BEGIN IMMEDIATE is emitted on every begin.
    """
    if sqlite_file(engine.url) is None:
        return engine  # an in-memory database is this engine's own, and thrown away anyway
    migrating = create_async_engine(engine.url, poolclass=NullPool, connect_args={"timeout": 30})
    tune_sqlite(migrating)  # the same journal and file watch as every other connection

    @event.listens_for(migrating.sync_engine, "connect")
    def _no_implicit_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(migrating.sync_engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return migrating


_holding: ContextVar[bool] = ContextVar("holding_startup_lock", default=False)


@contextlib.asynccontextmanager
async def startup_lock(engine: AsyncEngine) -> AsyncIterator[None]:
    """Hold the database's start-up lock: one process at a time changes its schema (re-entrant)."""
    if _holding.get():
        yield
        return
    token = _holding.set(True)
    try:
        async with _locked(engine):
            yield
    finally:
        _holding.reset(token)


@contextlib.asynccontextmanager
async def _locked(engine: AsyncEngine) -> AsyncIterator[None]:
    url = engine.url
    if url.get_backend_name() == "postgresql":
        async with engine.connect() as holder:
            await holder.execute(text("SELECT pg_advisory_lock(:key)"), {"key": ADVISORY_LOCK_KEY})
            try:
                yield
            finally:
                await holder.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": ADVISORY_LOCK_KEY})
        return
    database = sqlite_file(url)
    if database is None:
        yield  # only this process can see an in-memory database
        return
    lock = open(os.path.abspath(database) + ".lock", "a")  # noqa: SIM115 (held across the yield)
    try:
        await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()
