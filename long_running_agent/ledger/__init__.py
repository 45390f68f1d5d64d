"""The ledger: the domain. What was asked, decided, paid and delivered, and the rules for it.

    records.py    tickets, payouts, audit entries, statuses, conversations
    (refusals/, beside this package: what the ledger refuses, defined once for every surface)
    policy.py     amounts and purposes a payout may have
    inputs.py     one rule per input: names, reasons, purposes, message sizes
    schema.py     the tables, with the constraints that keep the invariants
    engine.py     database engines, for the ledger and ADK's session store
    ledger.py     `Ledger`: one object per concern below, all on one database handle
    database.py   the handle they share: an engine, a clock, tables at this code's schema
    tickets.py    tickets: opened, decided once, withdrawn, expired; the audit trail
    request_totals.py  the two-person rule's totals per purpose and message
    reminders.py  reminding of (and escalating) tickets about to expire
    audit.py      the one way an entry is added to the audit trail
    payouts.py    payouts: once per ticket; the daily rules for payouts without approval
    deliveries.py whether each decision reached its conversation; settling those that never can
    outbox.py     the notifications each ticket event sends, written with the change
    locks.py      one run at a time per conversation, across processes
    inbox.py      the approver's inbox in one read, for the API and the CLI
    migrate.py    the schema, by Alembic migrations (migrations/)
"""

from ..refusals.rules import (
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
from .ledger import Ledger
from .records import (
    DECIDED,
    AuditEntry,
    Conversation,
    Notification,
    Payout,
    Requested,
    Ticket,
    TicketStatus,
    ToolCall,
    utc_now,
)

__all__ = [
    "DAILY_LIMIT", "DECIDED", "SAME_PURPOSE", "AlreadyApprovedByYou", "AlreadyDecided", "AuditEntry",
    "Conversation", "DatabaseFileGone", "Inbox", "Ledger", "LedgerError", "NeedsApproval", "NotAllowed",
    "NotAnApprover", "NotApproved", "NotRequester", "NotSettleable", "Notification", "Payout", "Requested",
    "Ticket", "TicketExpired", "TicketNotFound", "TicketStatus", "ToolCall", "utc_now",
]
