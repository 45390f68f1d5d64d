"""What the ledger refuses, as structured errors: the ids and states involved.

Each surface words them for its own reader (the CLI a command to run, the API
a status code and a fix); the ledger only says what is the case.
"""

from __future__ import annotations

import re
from datetime import date

from .policy import from_cents
from .records import Payout, Ticket

# SQLAlchemy prefixes the driver's class and appends the statement, its
# parameters and a link to the driver's message.
_SQL_TAIL = re.compile(r"\s*(?:\[SQL: |\[parameters: |\(Background on this error at: ).*", re.DOTALL)
_DRIVER = re.compile(r"\((?:sqlalchemy|sqlite3|asyncpg|psycopg)[\w.]*\) ")


def without_sql(text: str | None) -> str | None:
    """`text` (an error recorded for people to read) without the SQL SQLAlchemy put in it."""
    return _DRIVER.sub("", _SQL_TAIL.sub("", text)) if text else text


class LedgerError(Exception):
    """A ledger operation refused."""


class TicketNotFound(LedgerError):
    def __init__(self, ticket_id: str) -> None:
        self.ticket_id = ticket_id
        super().__init__(f"No ticket {ticket_id!r}.")


class AlreadyDecided(LedgerError):
    """The ticket left pending before this decision; the first decision stands."""

    def __init__(self, ticket: Ticket) -> None:
        self.ticket = ticket
        if ticket.status == "cancelled":
            super().__init__(f"Ticket {ticket.id} was withdrawn by its requester, {ticket.decided_by}; "
                             "there is nothing left to decide.")
            return
        by = f" by {ticket.decided_by}" if ticket.decided_by else ""
        super().__init__(f"Ticket {ticket.id} is already {ticket.status}{by}.")


class AlreadyApprovedByYou(LedgerError):
    """Under the two-person rule, the approver already gave the first approval; someone else gives the second."""

    def __init__(self, ticket: Ticket) -> None:
        self.ticket = ticket
        super().__init__(f"{ticket.first_approved_by} already gave the first of two approvals on ticket {ticket.id}; "
                         "a second, different approver has to approve it.")


class TicketExpired(LedgerError):
    def __init__(self, ticket: Ticket) -> None:
        self.ticket = ticket
        super().__init__(f"Ticket {ticket.id} expired at {ticket.expires_at:%Y-%m-%d %H:%M} UTC and can no "
                         "longer be decided; the requester has to ask again.")


class NotAllowed(LedgerError):
    """The approver is the requester: nobody decides their own expense."""

    def __init__(self, ticket_id: str, approver: str) -> None:
        self.ticket_id, self.approver = ticket_id, approver
        super().__init__(f"{approver} requested ticket {ticket_id} and cannot approve or reject it.")


class NotAnApprover(LedgerError):
    """APPROVERS names who may decide, and this name is not among them."""

    def __init__(self, name: str, approvers: list[str]) -> None:
        self.name, self.approvers = name, approvers
        super().__init__(f"{name} is not an approver: APPROVERS names {', '.join(approvers)}.")


class NotRequester(LedgerError):
    """Only the person who asked may withdraw a request."""

    def __init__(self, ticket_id: str, who: str) -> None:
        self.ticket_id, self.who = ticket_id, who
        super().__init__(f"{who} did not request ticket {ticket_id}; only its requester can withdraw it.")


class NotApproved(LedgerError):
    """No approved ticket of the conversation matches a payout above the threshold."""

    def __init__(self, purpose: str, amount_cents: int) -> None:
        self.purpose, self.amount_cents = purpose, amount_cents
        super().__init__(
            f"No approved ticket for ${from_cents(amount_cents):,} ({purpose}) in this conversation. "
            "Amounts above the limit are paid only after an approver approves the ticket from ask_for_approval."
        )


class NotSettleable(LedgerError):
    """Only a decided ticket whose delivery failed, and not yet settled, can be settled."""

    def __init__(self, ticket: Ticket) -> None:
        self.ticket = ticket
        state = (
            "still pending" if ticket.status == "pending"
            else "already delivered to its conversation" if ticket.delivered_at
            else f"already settled by {ticket.settled_by}" if ticket.settled_at
            else "not yet shown to be undeliverable (no delivery has failed)"
        )
        super().__init__(f"Ticket {ticket.id} is {state}; only a decision that cannot reach its "
                         "conversation is settled.")


class DatabaseFileGone(LedgerError):
    """The SQLite file this process opened was deleted or replaced while it ran (engine.py).

    Going on would split the data: this process on the old file, new
    processes on whatever is at the path now. So it stops using the database.
    """

    def __init__(self, path: str, *, replaced: bool) -> None:
        self.path, self.replaced = path, replaced
        what = "replaced by another file" if replaced else "deleted"
        super().__init__(f"The database file {path} was {what} after this process opened it, so this "
                         "process no longer uses the database.")


DAILY_LIMIT, SAME_PURPOSE = "daily_limit", "same_purpose"


class NeedsApproval(LedgerError):
    """A payout within the threshold that the daily rules send to an approver.

    `reason` is DAILY_LIMIT (it would take the requester's total paid without
    approval on `day` above `limit_cents`) or SAME_PURPOSE (`earlier` was paid
    without approval for the same purpose that day). Each surface words it.
    """

    def __init__(
        self, reason: str, *, requester: str, day: date, amount_cents: int, limit_cents: int,
        paid_today_cents: int, earlier: Payout | None = None,
    ) -> None:
        self.reason = reason
        self.requester = requester
        self.day = day
        self.amount_cents = amount_cents
        self.limit_cents = limit_cents
        self.paid_today_cents = paid_today_cents
        self.earlier = earlier
        paid = f"${from_cents(paid_today_cents):,}"
        if reason == SAME_PURPOSE and earlier is not None:
            why = (f"{earlier.amount_text} for {earlier.purpose} was already paid without approval "
                   f"to {requester} on {day} (UTC), payout {earlier.id}")
        elif reason == SAME_PURPOSE:
            why = f"the same purpose was already paid without approval to {requester} on {day} (UTC)"
        else:
            why = (f"{paid} already paid without approval to {requester} on {day} (UTC); "
                   f"the daily limit is ${from_cents(limit_cents):,}")
        self.why = why
        super().__init__(f"${from_cents(amount_cents):,} needs approval: {why}.")
