"""What the approval guard refuses (delivery/guard.py), and a decision that has not reached its conversation."""

from __future__ import annotations

from datetime import timedelta
from typing import ClassVar

from ..error_text import without_sql
from ..names import Outcome
from . import Refusal, Ticket


class NotAcceptedAnswer(Refusal):
    """A FunctionResponse that cannot resume the agent: the ledger, not the message, decides."""

    code = "answer_not_accepted"
    next_step = "Only an approver's decision answers an approval; it reaches this conversation by itself."


class NoSuchCall(NotAcceptedAnswer):
    code = "no_such_call"

    def __init__(self, call_id: str | None) -> None:
        super().__init__(f"No function call with id {call_id!r} in this conversation.")


class NotAnApproval(NotAcceptedAnswer):
    code = "not_an_approval"

    def __init__(self, name: str | None) -> None:
        super().__init__(f"{name} is not answered by the application; only approvals are.")


class NoTicketForCall(NotAcceptedAnswer):
    code = "no_ticket"

    def __init__(self) -> None:
        super().__init__("This approval call has no ticket (the request was invalid).")


class AnswerDisagrees(NotAcceptedAnswer):
    code = "answer_disagrees"
    next_step = "Send the decision as the ledger records it ({show} shows it), or let the app deliver it: {deliver}."

    def __init__(self, ticket_id: str, why: str) -> None:
        super().__init__(f"The response does not agree with the ledger: {why}.", ticket_id=ticket_id)


class StillPending(Refusal):
    code = "still_pending"
    next_step = "Only an approver decides it: {decide}; the decision then reaches the conversation by itself."

    def __init__(self, ticket_id: str) -> None:
        super().__init__(f"Ticket {ticket_id} is still pending.", ticket_id=ticket_id)


class AlreadyDelivered(Refusal):
    code = "already_delivered"
    next_step = "Nothing to do. {show} shows its history."

    def __init__(self, ticket: Ticket, outcome: str = "") -> None:
        """`outcome`: what the decision led to ("$250.00 was paid (payout P-...)"), when known."""
        by = f" by {ticket.decided_by}" if ticket.decided_by else ""
        led_to = f": {outcome}" if outcome else ""
        message = (f"Ticket {ticket.id} was {ticket.status}{by} and then settled by {ticket.settled_by} without its "
                   f"conversation{led_to}." if ticket.settled_at else
                   f"Ticket {ticket.id} was already {ticket.status}{by}, and the decision reached its "
                   f"conversation{led_to}.")
        super().__init__(message, ticket_id=ticket.id, code="already_settled" if ticket.settled_at else None)


class UnstorableMessage(Refusal):
    code = "invalid_characters"
    next_step = "Send it again without it."

    def __init__(self) -> None:
        super().__init__("The message has a NUL character (\\u0000) or text that is not Unicode, so it was not stored.")


class MessageTooLong(Refusal):
    code = "too_large"
    next_step = "Send a shorter one: the purpose and the amount are enough."

    def __init__(self, size: int, most: int) -> None:
        super().__init__(f"The message has {size:,} characters; at most {most:,} are taken.")


class ConversationInUse(Refusal):
    code = "conversation_in_use"
    next_step = "Wait until the tickets are decided and delivered ({show}), then delete it."

    def __init__(self, ticket_ids: list[str]) -> None:
        super().__init__(f"This conversation cannot be deleted: it still waits for {', '.join(ticket_ids)}. "
                         "Its decision has to reach it first.", ticket_id=ticket_ids[0])


class NotDelivered(Refusal):
    """The ledger holds the decision; the conversation does not have it yet (delivery/courier.py says why)."""

    # Each outcome's code and next step.
    OUTCOMES: ClassVar[dict[Outcome, tuple[str, str]]] = {
        Outcome.BUSY: ("conversation_busy", "Another run is using the conversation; retry shortly: {deliver}."),
        Outcome.UNREACHABLE: ("conversation_unreachable", "It reaches the conversation when the requester next writes "
                              "there. If that can never happen, {settle} pays an approved ticket without it."),
        Outcome.CONVERSATION_MISSING: ("conversation_missing", "The conversation was deleted (or started again without "
                                       "the call); {settle} pays an approved ticket without it (or closes a rejected "
                                       "one)."),
        Outcome.FAILED: ("delivery_failed", "Fix the cause (the log has the details), then deliver it: {deliver}. If "
                         "it can never arrive: {settle}."),
    }

    def __init__(self, outcome: Outcome, ticket: Ticket, detail: str, where: str,
                 retry_after: timedelta | None = None) -> None:
        self.retry_after = retry_after  # the API's Retry-After (web/api_errors.py)
        super().__init__(f"Ticket {ticket.id} is {ticket.status} in the ledger, but the decision has not reached "
                         f"its conversation: {without_sql(detail) or ''}. Looked in {where}.",
                         ticket_id=ticket.id, code=self.OUTCOMES[outcome][0], next_step=self.OUTCOMES[outcome][1])
