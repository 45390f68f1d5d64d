"""Resuming a single ticket with many tickets pending.

The store is filled the fast way: one real request leaves a pending ticket,
then SQL copies that ticket (with its audit row, its session and the
session's events) until the wanted number of tickets is pending, all in one
INSERT ... SELECT per table (`copy_sql`). Each copy gets its own ticket, call
and session id, so every index holds as many distinct keys as a real backlog
would. The store is then ANALYZEd (on PostgreSQL: VACUUM ANALYZE), as
autovacuum would do by itself after a bulk load.

A fresh request is made (not timed), then the approver's `Courier.decide`
is timed: the ledger decision, the guard's checks, the agent's resume and the
payout. The inbox at the same scale is inbox.py's.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from google.adk.sessions.schemas.v1 import Base as AdkBase
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from long_running_agent.ledger import TicketStatus
from long_running_agent.ledger.storage.schema import Base

from .flows import OURS, System, open_system
from .stores import Stores

# Columns that must differ per copy (keys), per table; the rest are copied as is.
_UNIQUE = {
    "approval_tickets": {"id", "session_id", "call_id"},
    "approval_audit": {"ticket_id"},
    "sessions": {"id"},
    "events": {"id", "session_id"},
}
# Which template row each table copies: (column, attribute of the template).
_TEMPLATE = {
    "approval_tickets": ("id", "ticket_id"),
    "approval_audit": ("ticket_id", "ticket_id"),
    "sessions": ("id", "session_id"),
    "events": ("session_id", "session_id"),
}


class Backlog:
    """Grows the number of pending tickets in one store by copying a template."""

    def __init__(self, system: System) -> None:
        assert system.ledger is not None, "the backlog is this project's ledger"
        self.system = system
        self.engine = system.ledger.engine
        self.template: dict[str, str] = {}
        self.copies = 0

    async def grow_to(self, pending: int) -> float:
        """Make `pending` tickets pending; returns the seconds it took."""
        started = time.perf_counter()
        if not self.template:
            request = await self.system.request("backlog-requester")
            self.template = {"ticket_id": request.ticket_id, "session_id": request.session_id}
        wanted = pending - 1 - self.copies
        if wanted > 0:
            # On PostgreSQL, a connection of its own: a pooled backend may keep the
            # plans of its foreign-key checks from when `sessions` was tiny (a
            # sequential scan per inserted event). ANALYZE after each table,
            # inside the transaction, plans the next table's checks on its size.
            postgres = self.engine.dialect.name == "postgresql"
            copier = create_async_engine(self.engine.url, poolclass=NullPool) if postgres else self.engine
            try:
                async with copier.begin() as conn:
                    for table in _UNIQUE:
                        await conn.execute(text(copy_sql(copier.dialect.name, table)), {
                            "first": self.copies + 1,
                            "last": self.copies + wanted,
                            "template": self.template[_TEMPLATE[table][1]],
                        })
                        await conn.execute(text(f"ANALYZE {table}"))
            finally:
                if postgres:
                    await copier.dispose()
            self.copies += wanted
            await analyze(self.engine)
        return time.perf_counter() - started

    async def pending(self) -> int:
        assert self.system.ledger is not None
        return await self.system.ledger.tickets.count(TicketStatus.PENDING)


def _columns(table: str) -> list[str]:
    metadata = Base.metadata if table in Base.metadata.tables else AdkBase.metadata
    return [c.name for c in metadata.tables[table].columns]


def copy_sql(dialect: str, table: str, *, tag: str = "", values: dict[str, str] | None = None) -> str:
    """INSERT ... SELECT: copies of `table`'s template row (`:template`), numbered `:first` to `:last`.

    Each key column gets "-<tag><n>" appended; `values` sets other columns to
    SQL expressions (e.g. a status) instead of the template's values.
    """
    values = values or {}
    columns = [c for c in _columns(table) if not (table == "approval_audit" and c == "id")]
    selected = ", ".join(
        f"{c} || '-{tag}' || CAST(n.i AS TEXT)" if c in _UNIQUE[table] else values.get(c, c) for c in columns
    )
    key = _TEMPLATE[table][0]
    # The template rows are read once (MATERIALIZED), not once per copy: a key
    # such as events.session_id has no index of its own, and a nested loop over
    # the numbers would scan the whole table for each of 100,000 copies.
    template = f"template AS MATERIALIZED (SELECT * FROM {table} WHERE {key} = :template)"
    if dialect == "sqlite":
        numbers = f"WITH RECURSIVE n(i) AS (SELECT :first UNION ALL SELECT i + 1 FROM n WHERE i < :last), {template} "
        source = "FROM template, n"
    else:
        numbers = f"WITH {template} "
        source = "FROM template, generate_series(CAST(:first AS INTEGER), CAST(:last AS INTEGER)) AS n(i)"
    return f"{numbers}INSERT INTO {table} ({', '.join(columns)}) SELECT {selected} {source}"


async def analyze(engine: AsyncEngine) -> None:
    """Fresh planner statistics after a bulk load, as autovacuum would gather by itself."""
    if engine.dialect.name == "sqlite":
        async with engine.begin() as conn:
            await conn.execute(text("ANALYZE"))
        return
    # The throwaway server runs with synchronous_commit=off, so VACUUM can
    # mark the new pages all-visible (what index-only scans need) only once
    # the WAL has been flushed, a moment later; autovacuum would get there
    # by itself.
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        for _attempt in range(20):
            await conn.execute(text("VACUUM ANALYZE"))
            visible, pages = (await conn.execute(text(
                "SELECT relallvisible, relpages FROM pg_class WHERE relname = 'approval_tickets'"
            ))).one()
            if visible >= pages:
                return
            await asyncio.sleep(0.25)


async def time_resume(system: System, repeats: int) -> dict[str, float]:
    """Median seconds of approving one fresh ticket and resuming its conversation."""
    samples = []
    for n in range(repeats + 1):
        pending = await system.request(f"scale-requester-{n}")
        started = time.perf_counter()
        await system.approve(pending)
        elapsed = time.perf_counter() - started
        if n >= 1:
            samples.append(elapsed)
        assert await system.payouts(pending) == 1
    return {"median_s": statistics.median(samples)}


async def measure_resume(stores: Stores, *, sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    """Resume timings per durable store, growing one backlog through the sizes."""
    resume = []
    for store in ("sqlite", "postgres"):
        if not stores.has(store):
            continue
        system = open_system(OURS, store, await stores.fresh(store))
        try:
            backlog = Backlog(system)
            for size in sorted(sizes):
                fill_s = await backlog.grow_to(size)
                resume.append({"store": store, "pending": await backlog.pending(), "fill_s": fill_s,
                               "repeats": repeats, **await time_resume(system, repeats)})
        finally:
            await system.close()
    return resume
