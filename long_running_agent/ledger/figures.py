"""What operators watch, read from the database at each scrape (observability/metrics.py): the same on every replica.

Each is one read along an index: the kept pending count (PendingCountRow), the oldest pending ticket (the
status-and-created index), the outbox's unsent rows (its partial index) and today's payouts (a range of `paid_at`,
migration 0012).
"""

from __future__ import annotations

from datetime import datetime, time

from sqlalchemy import func, select

from .records import TicketStatus, _utc
from .storage.database import Database
from .storage.schema import NotificationRow, PayoutRow, PendingCountRow, TicketRow

_PENDING = select(func.coalesce(func.sum(PendingCountRow.pending), 0))
_OLDEST = select(func.min(TicketRow.created_at)).where(TicketRow.status == TicketStatus.PENDING.value)
_UNSENT = select(func.count()).select_from(NotificationRow).where(NotificationRow.sent_at.is_(None),
                                                                  NotificationRow.failed_at.is_(None))


class Figures:
    """The database's figures, for a scrape."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def read(self) -> dict[str, float]:
        """The gauges metrics.py names (GAUGES), as they stand now."""
        now = self.database.now()
        midnight = datetime.combine(now.date(), time(), tzinfo=now.tzinfo)
        async with await self.database.session() as db:
            pending = int(await db.scalar(_PENDING) or 0)
            oldest: datetime | None = _utc(await db.scalar(_OLDEST))
            unsent = int(await db.scalar(_UNSENT) or 0)
            paid = int(await db.scalar(select(func.coalesce(func.sum(PayoutRow.amount_cents), 0))
                                       .where(PayoutRow.paid_at >= midnight)) or 0)
        return {"pending_tickets": pending,
                "oldest_pending_seconds": max(0.0, (now - oldest).total_seconds()) if oldest and pending else 0.0,
                "outbox_pending": unsent, "paid_today_dollars": paid / 100}
