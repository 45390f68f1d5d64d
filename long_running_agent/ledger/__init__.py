"""The ledger: the domain. What was asked, decided, paid and delivered, and the rules for it.

    records.py    tickets, payouts, audit entries, statuses, conversations
    errors.py     what the ledger refuses, as structured errors
    policy.py     amounts and purposes a payout may have
    inputs.py     one rule per input: names, reasons, purposes, message sizes
    schema.py     the tables, with the constraints that keep the invariants
    engine.py     database engines, for the ledger and ADK's session store
    inbox.py      the approver's inbox in one read, for the API and the CLI
    store.py      `Ledger`: tickets.py + payouts.py + deliveries.py + inbox.py on one database
    locks.py      one run at a time per conversation, across processes
"""

from .errors import (
    DAILY_LIMIT,
    SAME_PURPOSE,
    AlreadyApprovedByYou,
    AlreadyDecided,
    DatabaseFileGone,
    LedgerError,
    NeedsApproval,
    NotAllowed,
    NotAnApprover,
    NotApproved,
    NotRequester,
    NotSettleable,
    TicketExpired,
    TicketNotFound,
)
from .inbox import Inbox
from .records import DECIDED, AuditEntry, Conversation, Notification, Payout, Ticket, TicketStatus, utc_now
from .store import Ledger

__all__ = [
    "DAILY_LIMIT", "DECIDED", "SAME_PURPOSE", "AlreadyApprovedByYou", "AlreadyDecided", "AuditEntry",
    "Conversation", "DatabaseFileGone", "Inbox", "Ledger", "LedgerError", "NeedsApproval", "NotAllowed",
    "NotAnApprover", "NotApproved", "NotRequester", "NotSettleable", "Notification", "Payout", "Ticket",
    "TicketExpired", "TicketNotFound", "TicketStatus", "utc_now",
]
