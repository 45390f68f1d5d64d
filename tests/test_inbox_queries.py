"""The inbox's lists in the ledger: pages in one total order, totals, and indexes that answer them.

Runs on a SQLite file and on a real PostgreSQL server. The query plans are
those of the SQL the ledger really sends, captured as it runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event, text
from support.clock import FakeClock
from support.tickets import APP, open_tickets, pay_and_mark_delivered

from long_running_agent.ledger import Ledger, TicketStatus
from long_running_agent.ledger.storage.schema import TicketRow
from long_running_agent.paging import Page

NOON = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture
async def at_noon(db_url) -> AsyncIterator[tuple[Ledger, FakeClock]]:
    """The test's ledger on a clock the test moves by hand, so tickets can share a creation time."""
    clock = FakeClock(NOON)
    ledger = Ledger(db_url, clock=clock)
    yield ledger, clock
    await ledger.close()


async def test_pages_hold_every_pending_ticket_once_in_age_order(at_noon):
    ledger, clock = at_noon
    # Three tickets share one creation time: the id orders them, the same way on every page.
    same_time = await open_tickets(ledger, 3, "same-time")
    clock.advance(minutes=1)
    later = await open_tickets(ledger, 4, "later")

    pages = [await ledger.tickets.with_status(limit=3, offset=offset) for offset in (0, 3, 6, 9)]

    paged = [t.id for page in pages for t in page]
    assert paged == sorted(t.id for t in same_time) + sorted(t.id for t in later)
    assert [len(page) for page in pages] == [3, 3, 1, 0]
    assert await ledger.tickets.count() == 7
    # A decision moves the later tickets up; the total says so.
    await ledger.tickets.decide(paged[0], approver="bob", approve=True)
    assert [t.id for t in await ledger.tickets.with_status(limit=3, offset=3)] == paged[4:7]
    assert await ledger.tickets.count() == 6


async def test_undelivered_decisions_are_listed_however_old(at_noon):
    ledger, clock = at_noon
    oldest, *others = await open_tickets(ledger, 14, "decided")
    await ledger.tickets.decide(oldest.id, approver="bob", approve=True)
    await ledger.deliveries.mark_undelivered(oldest.id, actor="bob",
                                             error="conversation s-0 of dave is not in the store")
    for ticket in others:
        clock.advance(minutes=1)
        await ledger.tickets.decide(ticket.id, approver="bob", approve=False, reason="no receipt")
    for ticket in others[:-1]:
        await ledger.deliveries.mark_delivered(ticket.id, actor="bob")

    recent = await ledger.tickets.recent_decisions(limit=10)
    undelivered = await ledger.deliveries.undelivered(limit=50)

    assert oldest.id not in [t.id for t in recent] and len(recent) == 10
    assert [t.id for t in undelivered] == [oldest.id, others[-1].id]
    assert undelivered[0].delivery_error == "conversation s-0 of dave is not in the store"
    assert await ledger.deliveries.count_undelivered() == 2
    assert [t.id for t in await ledger.deliveries.undelivered(limit=1, offset=1)] == [others[-1].id]
    # No limit: all of them, as the delivery sweep reads.
    assert await ledger.deliveries.undelivered() == undelivered


async def test_the_inbox_read_expires_overdue_tickets_before_it_lists_them(at_noon):
    ledger, clock = at_noon
    old = await open_tickets(ledger, 2, "old")
    clock.advance(days=2)
    fresh = await open_tickets(ledger, 1, "fresh")
    clock.advance(days=1, seconds=1)  # the old ones' three days are over

    inbox = await ledger.inbox.read(limit=10, undelivered_limit=10)

    assert [t.id for t in inbox.pending] == [fresh[0].id] and inbox.total_pending == 1
    # An expiry is a decision the requester has not been told of yet.
    assert {t.id for t in inbox.undelivered} == {t.id for t in old} == {t.id for t in inbox.recent_decisions}
    assert {t.status for t in inbox.undelivered} == {TicketStatus.EXPIRED} and inbox.total_undelivered == 2
    assert inbox.now == clock.now
    assert (await ledger.inbox.read(limit=10, undelivered_limit=10, recent=0)).recent_decisions == []


async def add_delivered_decisions(ledger: Ledger, count: int) -> None:
    async with await ledger.database.session() as db, db.begin():
        db.add_all(
            TicketRow(
                id=f"T-old{n:09d}", app_name=APP, user_id="dave", session_id=f"old-{n}", call_id="adk-1",
                call_name="ask_for_approval", purpose="old", amount_cents=20000, status=TicketStatus.APPROVED,
                created_at=NOON - timedelta(days=30, minutes=n), expires_at=NOON - timedelta(days=27),
                decided_by="bob", decided_at=NOON - timedelta(days=29, minutes=n),
                delivered_at=NOON - timedelta(days=29, minutes=n), session_store="app",
            )
            for n in range(count)
        )


async def plans(ledger: Ledger, statements: list[tuple[str, object]]) -> list[str]:
    """The database's plan for each captured statement, as one string each."""
    async with ledger.engine.connect() as conn:
        if ledger.engine.dialect.name == "sqlite":
            explain = "EXPLAIN QUERY PLAN "
            await conn.execute(text("ANALYZE"))
        else:
            explain = "EXPLAIN "
            await conn.execute(text("ANALYZE"))
            # Tiny test tables are cheaper to scan whole; ask whether an index *can* answer.
            await conn.execute(text("SET enable_seqscan = off"))
            await conn.execute(text("SET enable_bitmapscan = off"))
        found = []
        for statement, parameters in statements:
            rows = (await conn.exec_driver_sql(explain + statement, parameters)).all()
            found.append(" | ".join(str(row[-1]) for row in rows))
        return found


# By dialect: what the plans of the expiry, the page, the undelivered list and count and the recent decisions show,
# and what a plan shows for a sort on the side.
READS = {
    "sqlite": (("INDEX ix_approval_tickets_status_expires (status=? AND expires_at<?)",
                "USING INDEX ix_approval_tickets_status_created_id", "USING INDEX ix_approval_tickets_undelivered",
                "USING COVERING INDEX ix_approval_tickets_undelivered", "USING INDEX ix_approval_tickets_decided"),
               "TEMP B-TREE"),
    "postgresql": (("using ix_approval_tickets_status_expires",
                    "Index Scan using ix_approval_tickets_status_created_id",
                    "Index Scan using ix_approval_tickets_undelivered",
                    "Index Only Scan using ix_approval_tickets_undelivered",
                    "Index Scan Backward using ix_approval_tickets_decided"), "Sort"),
}


async def test_inbox_queries_read_indexes_and_the_pending_total_reads_its_kept_count(at_noon):
    ledger, clock = at_noon
    # A store in the shape of a real one: many decisions delivered long ago, a few not.
    await add_delivered_decisions(ledger, 500)
    tickets = await open_tickets(ledger, 60, "busy")
    approved = []
    for ticket in tickets[:30]:
        clock.advance(seconds=1)
        approved.append(await ledger.tickets.decide(ticket.id, approver="bob", approve=True))
    for ticket in approved[:25]:
        await pay_and_mark_delivered(ledger, ticket, actor="bob")

    sent: list[tuple[str, object]] = []

    def capture(_conn, _cursor, statement, parameters, _context, _many) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            sent.append((statement, parameters))

    event.listen(ledger.engine.sync_engine, "before_cursor_execute", capture)
    # The one read GET /api/approvals and `.venv/bin/expenses inbox` make.
    inbox = await ledger.inbox.read(limit=10, offset=10, undelivered_limit=10)
    event.remove(ledger.engine.sync_engine, "before_cursor_execute", capture)
    assert (len(inbox.pending), inbox.total_pending, len(inbox.undelivered), inbox.total_undelivered,
            len(inbox.recent_decisions)) == (10, 30, 5, 5, 10)
    # The expiry sweep's SELECT, five reads, then the page's requesters' days: their tickets, their payouts.
    assert len(sent) == 8, sent

    (expiry_plan, page_plan, count_plan, undelivered_plan, undelivered_count_plan, recent_plan, day_plan,
     paid_plan) = await plans(ledger, sent)
    # A requester's day reads along their tickets' index and their payouts' key, never the whole table.
    assert "ix_approval_tickets_user_created" in day_plan, day_plan
    assert "daily_auto_approvals_1" in paid_plan or "pk_daily_auto_approvals" in paid_plan, paid_plan

    reads, sort = READS[ledger.engine.dialect.name]
    for plan, index in zip((expiry_plan, page_plan, undelivered_plan, undelivered_count_plan, recent_plan), reads,
                           strict=True):
        assert index in plan, plan
    sorted_apart = [p for p in (page_plan, undelivered_plan, recent_plan) if sort in p]
    # Pages come out of the index in order: nothing is sorted on the side.
    assert sorted_apart == []
    # The pending total is the kept count's few rows, not one index entry per pending ticket.
    assert "pending_counts" in count_plan and "approval_tickets" not in count_plan, count_plan


@pytest.mark.parametrize("page, shown", [
    (Page(0, 50, 1234, 50), "showing 1–50 of 1,234"),
    (Page(1200, 50, 1234, 34), "showing 1,201–1,234 of 1,234"),
    (Page(100, 50, 30, 0), "showing none of 30"),
])
def test_a_page_says_where_it_is(page, shown):
    assert page.describe() == shown


def test_a_page_knows_its_neighbours():
    assert (Page(0, 50, 120, 50).next_offset, Page(0, 50, 120, 50).previous_offset) == (50, None)
    assert (Page(100, 50, 120, 20).next_offset, Page(100, 50, 120, 20).previous_offset) == (None, 50)
    assert Page(20, 50, 120, 50).previous_offset == 0


async def test_the_pending_count_follows_every_change_to_the_tickets_even_by_hand(at_noon):
    ledger, clock = at_noon
    opened = await open_tickets(ledger, 6, "counted")
    await ledger.tickets.decide(opened[0].id, approver="bob", approve=True)
    await ledger.tickets.decide(opened[1].id, approver="bob", approve=False, reason="no receipt")
    await ledger.tickets.withdraw(opened[2].id, requester=opened[2].user_id)
    assert await ledger.tickets.count() == 3
    # Rows written by hand, outside the ledger's code, are counted too: the database keeps the count.
    async with ledger.engine.begin() as conn:
        await conn.execute(text(
            "INSERT INTO approval_tickets (id, app_name, user_id, session_id, call_id, call_name, purpose, "
            "amount_cents, status, created_at, expires_at, approvals_needed, session_store) "
            "SELECT id || '-copy', app_name, user_id, session_id, call_id || '-copy', call_name, purpose, "
            "amount_cents, status, created_at, expires_at, approvals_needed, session_store FROM approval_tickets"))
        await conn.execute(text("DELETE FROM approval_tickets WHERE id = :id"), {"id": opened[3].id})
    clock.advance(days=4)
    await ledger.tickets.expire_due()
    assert await ledger.tickets.count() == 0
    async with ledger.engine.connect() as conn:
        counted = (await conn.execute(text(
            "SELECT count(*) FROM approval_tickets WHERE status = 'pending'"))).scalar()
    assert counted == 0
    await open_tickets(ledger, 2, "after")
    assert await ledger.tickets.count() == 2
