"""The approval ledger: the only authority on whether money may be paid out.

One database (a SQLite file by default, or PostgreSQL through one SQLAlchemy
URL) and one object per concern, all on its one handle (database.py):

    ledger.tickets     what was asked and decided, and the audit trail (tickets.py)
    ledger.payouts     what was paid, and the daily rules for paying without approval (payouts.py)
    ledger.deliveries  whether each decision reached its conversation; settling those that never can
    ledger.outbox      the notifications each ticket event sends (outbox.py)
    ledger.locks       one run at a time per conversation (locks.py)
    ledger.inbox       the approver's inbox in one read (inbox.py)

The database, not a scan of session events, guarantees that a ticket is
decided once and paid at most once.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from .database import Database
from .deliveries import Deliveries
from .inbox import InboxQueries
from .locks import ConversationLocks
from .outbox import Outbox
from .payouts import Payouts
from .policy import Policy
from .records import utc_now
from .tickets import Tickets


class Ledger:
    """Tickets, payouts, deliveries, the outbox, locks and the inbox, each an object on one database."""

    def __init__(
        self, url: str, *, clock: Callable[[], datetime] = utc_now, auto_migrate: bool = True,
        engine: AsyncEngine | None = None, outbox: bool = False, approvers: frozenset[str] | None = None,
        policy: Policy | None = None,
    ) -> None:
        """`engine`: one to share (services.py gives ADK's session store the same); default, one of its own.

        `outbox`: write a notification for each ticket event (on when a webhook is configured).
        `approvers`: the only names that may decide or settle a ticket (APPROVERS), in their
        canonical form; None lets any name but the requester's decide.
        `policy`: the thresholds and limits the agent's requests meet (default: the settings' defaults).
        """
        self.policy = policy or Policy()
        self.database = Database(url, clock=clock, auto_migrate=auto_migrate, engine=engine)
        self.outbox = Outbox(self.database, enabled=outbox)
        self.tickets = Tickets(self.database, self.outbox, approvers=approvers)
        self.payouts = Payouts(self.database)
        self.deliveries = Deliveries(self.database, self.tickets)
        self.inbox = InboxQueries(self.database, self.tickets)
        self.locks = ConversationLocks(self.database)

    @property
    def engine(self) -> AsyncEngine:
        return self.database.engine

    def now(self) -> datetime:
        return self.database.now()

    async def prepare(self) -> tuple[str | None, str]:
        """Bring the tables to this code's schema (migrate.py); returns (from, to)."""
        return await self.database.prepare()

    async def close(self) -> None:
        await self.database.close()
