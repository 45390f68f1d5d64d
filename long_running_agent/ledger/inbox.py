"""The approver's inbox in one read: what `GET /api/approvals` and `expenses inbox` show.

Each list and total is one query answered from an index of storage/schema.py (tests/test_inbox_queries.py checks the
plans; benchmarks/README.md has the times with 100,000 tickets pending).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .deliveries import count_undelivered_in, undelivered_in
from .policy.request_totals import RequesterDay, requester_days
from .records import Ticket, TicketStatus
from .storage.database import Database
from .tickets import Tickets, count_in, latest_decisions, tickets_in

RECENT_DECISIONS = 10


@dataclass(frozen=True)
class Inbox:
    """One read of the inbox: each list is one page, each total counts its whole list."""

    now: datetime
    pending: list[Ticket]
    total_pending: int
    undelivered: list[Ticket]
    total_undelivered: int
    recent_decisions: list[Ticket]
    # Each pending ticket's requester's day, by ticket id: approvers see a split's other halves.
    days: dict[str, RequesterDay]


class InboxQueries:
    """The inbox's read, on the tickets' database."""

    def __init__(self, database: Database, tickets: Tickets) -> None:
        self.database = database
        self.tickets = tickets

    async def read(
        self, *, limit: int, offset: int = 0, undelivered_limit: int, undelivered_offset: int = 0,
        recent: int = RECENT_DECISIONS,
    ) -> Inbox:
        """Expire what is overdue (so nothing undecidable is offered), then read the pages and their totals."""
        if expired := await self.tickets.expire_due():
            self.database.watch.tell("ledger.expire", outcome="expired", channel="sweep", count=len(expired))
        # One session for the seven reads: on PostgreSQL each session of its own
        # would add a pool check-out (a ping), a BEGIN and a ROLLBACK.
        async with await self.database.session() as db:
            pending = await db.scalars(tickets_in(TicketStatus.PENDING, limit, offset))
            total_pending = await db.scalar(count_in(TicketStatus.PENDING))
            undelivered = await db.scalars(undelivered_in(limit=undelivered_limit, offset=undelivered_offset))
            total_undelivered = await db.scalar(count_undelivered_in())
            recent_rows = list(await db.scalars(latest_decisions(recent))) if recent else []
            pending_tickets = [self.tickets.rules.recount(Ticket.of(row)) for row in pending]
            return Inbox(
                now=self.database.now(),
                pending=pending_tickets,
                total_pending=int(total_pending or 0),
                undelivered=[Ticket.of(row) for row in undelivered],
                total_undelivered=int(total_undelivered or 0),
                recent_decisions=[Ticket.of(row) for row in recent_rows],
                days=await requester_days(db, pending_tickets),
            )
