"""What the ledger refuses: a ticket or a payout its rules do not allow, and a database it cannot use."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from ..names import TicketStatus
from . import Payout, Refusal, Ticket


def dollars(cents: int) -> str:
    return f"${Decimal(cents) / 100:,.2f}"


class LedgerError(Refusal):
    """A ledger operation refused."""


class TicketNotFound(LedgerError):
    code = "ticket_not_found"
    next_step = "Check the id; {inbox} lists the pending tickets."

    def __init__(self, ticket_id: str) -> None:
        super().__init__(f"No ticket {ticket_id!r}.", ticket_id=ticket_id)


class AlreadyDecided(LedgerError):
    code = "already_decided"
    next_step = "Nothing to do: the first decision stands. {show} shows its history."

    def __init__(self, ticket: Ticket) -> None:
        if ticket.status is TicketStatus.WITHDRAWN:
            # Whether or not the withdrawal has reached the chat yet: the requester made it there.
            super().__init__(f"Ticket {ticket.id} was withdrawn by its requester, {ticket.decided_by}; there is "
                             "nothing left to decide.", ticket_id=ticket.id, code="withdrawn",
                             next_step="Nothing to do: the requester withdrew it, and nothing will be paid for it.")
            return
        by = f" by {ticket.decided_by}" if ticket.decided_by else ""
        undelivered = "The decision is recorded but has not reached the conversation yet; deliver it with {deliver}."
        super().__init__(f"Ticket {ticket.id} is already {ticket.status}{by}.", ticket_id=ticket.id,
                         next_step=None if ticket.delivered_at or ticket.settled_at else undelivered)


class AlreadyApprovedByYou(LedgerError):
    code = "already_approved_by_you"
    next_step = "The next approval: {approve}."

    def __init__(self, ticket: Ticket, approver: str) -> None:
        super().__init__(f"{approver} already approved ticket {ticket.id} ({ticket.still_missing}); no approver "
                         "counts twice, so a different approver has to approve it.", ticket_id=ticket.id)


class NotInGroup(LedgerError):
    """The approver is in none of the groups the ticket's tier still needs (docs/policy.md)."""

    code = "not_in_group"
    next_step = "An approver in a group it still needs has to approve it: {approve}."

    def __init__(self, ticket: Ticket, approver: str, groups: frozenset[str], counts: bool) -> None:
        yours = ", ".join(sorted(groups)) or "no group"
        why = ("its approvals from your groups are all given" if counts
               else "it needs approvals from groups you are not in")
        super().__init__(f"Ticket {ticket.id} is at {ticket.still_missing}; {why} ({approver}: {yours}).",
                         ticket_id=ticket.id)


class NotAsShown(LedgerError):
    """The decision names a ticket other than the one its approver was shown (a crossed id, say)."""

    code = "not_as_shown"
    next_step = "Look at the ticket again ({show}) and decide on what it says."

    def __init__(self, ticket_id: str) -> None:
        super().__init__(f"Ticket {ticket_id} is not the ticket this decision was made on: what the approver was "
                         "shown does not match it.", ticket_id=ticket_id)


class TicketExpired(LedgerError):
    code = "ticket_expired"
    next_step = "Nothing to do: the requester was told it expired and has to ask again."

    def __init__(self, ticket: Ticket) -> None:
        super().__init__(f"Ticket {ticket.id} expired at {ticket.expires_at:%Y-%m-%d %H:%M} UTC and can no "
                         "longer be decided; the requester has to ask again.", ticket_id=ticket.id)


class NotAllowed(LedgerError):
    code = "not_allowed"
    next_step = "Another approver has to decide it."

    def __init__(self, ticket_id: str, approver: str) -> None:
        super().__init__(f"{approver} requested ticket {ticket_id} and cannot approve or reject it.",
                         ticket_id=ticket_id)


class NotAnApprover(LedgerError):
    code = "not_an_approver"
    next_step = "Decide as one of them, or ask one of them to decide it."

    def __init__(self, name: str, approvers: list[str]) -> None:
        super().__init__(f"{name} is not an approver: APPROVERS names {', '.join(approvers)}.")


class NotRequester(LedgerError):
    code = "not_requester"
    next_step = "An approver can reject it instead."

    def __init__(self, ticket_id: str, who: str) -> None:
        super().__init__(f"{who} did not request ticket {ticket_id}; only its requester can withdraw it.",
                         ticket_id=ticket_id)


class NotApproved(LedgerError):
    code = "not_approved"
    next_step = "Amounts above the threshold are paid only after an approver approves the ticket from ask_for_approval."

    def __init__(self, purpose: str, amount_cents: int) -> None:
        super().__init__(f"No approved ticket for {dollars(amount_cents)} ({purpose}) in this conversation.")


class NotSettleable(LedgerError):
    code = "not_settleable"
    next_step = "Deliver it with {deliver}; settle it only if that fails. {show} shows its state."

    def __init__(self, ticket: Ticket) -> None:
        done = "Nothing to do: {show} shows its history."
        state, next_step = (
            ("still pending", "An approver decides it first: {decide}.") if ticket.status is TicketStatus.PENDING
            else ("already delivered to its conversation", done) if ticket.delivered_at
            else (f"already settled by {ticket.settled_by}", done) if ticket.settled_at
            else ("not yet shown to be undeliverable (no delivery has failed)", None))
        super().__init__(f"Ticket {ticket.id} is {state}; only a decision that cannot reach its "
                         "conversation is settled.", ticket_id=ticket.id, next_step=next_step)


class DatabaseFileGone(LedgerError):
    """The SQLite file this process opened was deleted or replaced while it ran (ledger/storage/engine.py)."""

    code = "database_file_gone"
    next_step = ("Put the file back from a backup if you have one, then {restart}: a new process uses the "
                 "file at that path, or a new, empty one if there is none.")

    def __init__(self, path: str, *, replaced: bool) -> None:
        what = "replaced by another file" if replaced else "deleted"
        super().__init__(f"The database file {path} was {what} after this process opened it, so this "
                         "process no longer uses the database.")


DAILY_LIMIT, SAME_PURPOSE = "daily_limit", "same_purpose"


class NeedsApproval(LedgerError):
    """A payout within the threshold that the daily rules (`reason`) send to an approver; `why` is for the audit."""

    code = "needs_approval"
    next_step = "Call ask_for_approval with this purpose and amount."

    def __init__(self, reason: str, *, requester: str, day: date, amount_cents: int, limit_cents: int,
                 paid_today_cents: int, earlier: Payout | None = None) -> None:
        self.reason = reason
        amount, limit, paid = dollars(amount_cents), dollars(limit_cents), dollars(paid_today_cents)
        if reason == SAME_PURPOSE and earlier is not None:
            message = (f"You were already reimbursed {earlier.amount_text} for {earlier.purpose} today (UTC) "
                       "without approval, so another reimbursement for the same purpose needs an approver.")
            self.why = (f"{earlier.amount_text} for {earlier.purpose} was already paid without approval "
                        f"to {requester} on {day} (UTC), payout {earlier.id}")
        else:
            message = (f"You have been reimbursed {paid} today (UTC) without approval; the daily limit for "
                       f"that is {limit}, so this {amount} needs an approver." if paid_today_cents else
                       f"The daily limit for reimbursements without approval is {limit}, so this {amount} "
                       "needs an approver.")
            self.why = f"{paid} already paid without approval to {requester} on {day} (UTC); the daily limit is {limit}"
        super().__init__(message)


class NeedsNoApproval(LedgerError):
    code = "needs_no_approval"
    next_step = "Call reimburse directly."

    def __init__(self, amount: Decimal, threshold: Decimal) -> None:
        super().__init__(f"${amount:,} is within the ${threshold:,} threshold and needs no approval.")


class UnusableUserId(LedgerError):
    code = "invalid_user_id"
    next_step = "Start a session with such an id, e.g. alice."

    def __init__(self, user_id: str) -> None:
        if user_id.startswith("A2A_USER_"):  # plain `adk api_server --a2a` names each A2A context a new user
            self.next_step = ("Call it through make web, which serves it at /a2a/long_running_agent and names the "
                              "requester from the client's A2A_CLIENTS token (docs/a2a.md).")
            super().__init__("Plain `adk api_server --a2a` cannot tell who is asking: it makes each A2A context a new "
                             "requester, with fresh daily limits, so nothing is requested or paid here.")
            return
        super().__init__(f"The user id {user_id!r} is not a plain lower-case name (letters a-z, digits and "
                         ". _ @ + -); approvals need one, so that nobody can look like somebody else.")


class LedgerUnusable(Refusal):
    """The ledger's database cannot be used at all (down, gone, or at another schema): the chat is told so."""

    code = "database_unavailable"
    next_step = "Nothing was decided or paid for this message; please try again later."

    def __init__(self, why: str) -> None:
        super().__init__(f"The expense records cannot be used right now ({why.rstrip('.')}).")
