"""The ledger: the domain. What was asked, decided, paid and delivered, and the rules for it."""

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
