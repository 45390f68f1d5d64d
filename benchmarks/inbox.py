"""The approver's inbox with many tickets pending and many decided: the read the inbox really makes.

What is timed is `ledger.inbox.read(...)` with the inbox's defaults: the one
call behind `GET /api/approvals` (and, without the recent decisions, behind
`.venv/bin/expenses inbox`). It runs eight queries: the expiry sweep's SELECT of
overdue tickets, a page of 50 pending tickets and their total, a page of 50
decisions not delivered yet and their total, the 10 latest decisions, and the
page's requesters' other tickets and payouts without approval that day.

The store holds what a busy ledger holds. One real request leaves a pending
ticket; SQL copies that ticket row (scale.py's `copy_sql`) into `decided`
approved tickets whose decisions were delivered long ago, a few approved
ones whose delivery failed (what the undelivered list of a real inbox
holds), and then pending ones, growing through the sizes, each copy another
requester's. Only the ticket table is copied: the inbox reads nothing else but
the (empty) daily payouts. After each growth the store is ANALYZEd (VACUUM
ANALYZE on PostgreSQL) as autovacuum would be.

Per size: the median of the whole read, and each query's plan (SQLite
`EXPLAIN QUERY PLAN`, PostgreSQL `EXPLAIN`) with real statistics, and whether
it reads an index without a sort on the side.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from long_running_agent.ledger import Inbox, Ledger
from long_running_agent.paging import DEFAULT_LIMIT

from .flows import OURS, open_system
from .scale import analyze, copy_sql
from .stores import Stores

# The eight queries of one read, in the order ledger.inbox.read sends them.
QUERIES = ("overdue tickets", "pending page", "pending total", "undelivered page", "undelivered total",
           "recent decisions", "requesters' tickets that day", "requesters' payouts that day")
# Those that read the backlog, and must read it through an index; the last two read only the page's
# requesters' rows of one day (found by ix_approval_tickets_user_created and the daily rules' key), few
# whatever the backlog, so their plans are shown but a small sort or a scan of an empty table is no fault.
BACKLOG_QUERIES = QUERIES[:6]
UNDELIVERED = 5
_DECIDED = {"status": "'approved'", "decided_by": "'bench-approver'", "decided_at": "created_at"}
_DELIVERED = _DECIDED | {"delivered_at": "created_at"}
_NOT_DELIVERED = _DECIDED | {"delivery_error": "'the conversation could not be reached (benchmark)'"}


@contextmanager
def recording(engine: AsyncEngine) -> Iterator[list[tuple[str, Any]]]:
    """Each SELECT the engine sends while the block runs, with its parameters."""
    sent: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            sent.append((statement, parameters))

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)


async def read_as_the_api_does(ledger: Ledger) -> Inbox:
    """GET /api/approvals with no query string: the first pages, their totals, the latest decisions."""
    return await ledger.inbox.read(limit=DEFAULT_LIMIT, undelivered_limit=DEFAULT_LIMIT)


async def time_inbox(ledger: Ledger, repeats: int) -> dict[str, Any]:
    """Median seconds of the whole read, after two warm-ups; the statements the read sent."""
    with recording(ledger.engine) as statements:
        await read_as_the_api_does(ledger)
    if len(statements) != len(QUERIES):
        raise RuntimeError(f"the inbox read sent {len(statements)} queries, expected {len(QUERIES)}: "
                           f"{[s[:60] for s, _p in statements]}")
    totals: list[float] = []
    for n in range(repeats + 1):
        started = time.perf_counter()
        inbox = await read_as_the_api_does(ledger)
        if n:
            totals.append(time.perf_counter() - started)
    return {
        "median_s": statistics.median(totals),
        "shown": {"pending": len(inbox.pending), "total_pending": inbox.total_pending,
                  "undelivered": len(inbox.undelivered), "total_undelivered": inbox.total_undelivered,
                  "recent_decisions": len(inbox.recent_decisions)},
        "statements": statements,
    }


async def query_plans(engine: AsyncEngine, statements: list[tuple[str, Any]]) -> list[str]:
    """The database's plan for each statement, one string each (lines joined by " | ")."""
    sqlite = engine.dialect.name == "sqlite"
    plans = []
    async with engine.connect() as conn:
        for statement, parameters in statements:
            rows = (await conn.exec_driver_sql(
                ("EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN ") + statement, parameters
            )).all()
            plans.append(" | ".join(str(row[-1]).strip() for row in rows))
    return plans


def reads_an_index(dialect: str, plan: str) -> bool:
    """True when the plan reads the tickets through an index and sorts nothing on the side.

    The pending total reads no ticket: it sums the kept count's few rows (ledger/storage/schema.py's PendingCountRow).
    """
    if "approval_tickets" not in plan and "pending_counts" in plan:
        return True
    if dialect == "sqlite":
        steps = [s for s in plan.split(" | ") if "approval_tickets" in s]
        return bool(steps) and all(" USING " in s for s in steps) and "TEMP B-TREE" not in plan
    return "Index" in plan and "Seq Scan" not in plan and "Sort" not in plan


async def _fill(engine: AsyncEngine, template: str, *, first: int, last: int, tag: str,
                values: dict[str, str] | None = None) -> None:
    if last < first:
        return
    # Each copy is another requester's: a page of the inbox reads its requesters' other tickets of the day.
    values = {"user_id": f"user_id || '-{tag}' || CAST(n.i AS TEXT)"} | (values or {})
    async with engine.begin() as conn:
        await conn.execute(text(copy_sql(engine.dialect.name, "approval_tickets", tag=tag, values=values)),
                           {"first": first, "last": last, "template": template})


async def measure_inbox(
    stores: Stores, *, sizes: list[int], decided: int, repeats: int
) -> list[dict[str, Any]]:
    """Per durable store: the inbox read at each number of pending tickets, `decided` decided beside."""
    rows = []
    for store in ("sqlite", "postgres"):
        if not stores.has(store):
            continue
        system = open_system(OURS, store, await stores.fresh(store))
        ledger = system.ledger
        assert ledger is not None
        try:
            started = time.perf_counter()
            template = (await system.request("inbox-requester")).ticket_id
            await _fill(ledger.engine, template, first=1, last=decided, tag="d", values=_DELIVERED)
            await _fill(ledger.engine, template, first=1, last=UNDELIVERED, tag="u", values=_NOT_DELIVERED)
            copies = 0
            for size in sorted(sizes):
                await _fill(ledger.engine, template, first=copies + 1, last=size - 1, tag="p")
                copies = max(copies, size - 1)
                await analyze(ledger.engine)
                fill_s = time.perf_counter() - started
                timed = await time_inbox(ledger, repeats)
                plans = await query_plans(ledger.engine, timed.pop("statements"))
                dialect = ledger.engine.dialect.name
                rows.append({
                    "store": store,
                    "pending": timed["shown"]["total_pending"],
                    "decided": decided + UNDELIVERED,
                    "undelivered": timed["shown"]["total_undelivered"],
                    "repeats": repeats,
                    "fill_s": fill_s,
                    **timed,
                    "plans": dict(zip(QUERIES, plans, strict=True)),
                    "unindexed": [q for q, p in zip(QUERIES, plans, strict=True)
                                  if q in BACKLOG_QUERIES and not reads_an_index(dialect, p)],
                })
                started = time.perf_counter()
        finally:
            await system.close()
    return rows
