"""The approval ledger: the only authority on whether money may be paid out.

One database (a SQLite file by default, or PostgreSQL through one SQLAlchemy
URL) holds the tickets (tickets.py), the payouts and their daily rules
(payouts.py), whether each decision reached its conversation
(deliveries.py), and the approver's inbox read from them (inbox.py). The
database, not a scan of session events, guarantees that a ticket is decided
once and paid at most once.
"""

from __future__ import annotations

from .inbox import InboxQueries
from .payouts import Payouts


class Ledger(InboxQueries, Payouts):
    """Tickets, payouts, deliveries and their audit trail in one SQL database."""
