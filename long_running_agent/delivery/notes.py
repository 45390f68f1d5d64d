"""The chat's form of a refusal (refusals/): a tool's error response, or the approval guard's note in the agent's voice.

What the person sent is kept as a thought (shown in the dev UI, never read by the model), so the pending call stays
open for the real decision.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from google.adk.agents.invocation_context import InvocationContext
from google.genai import types

from ..ledger import Ledger, Ticket
from ..ledger.inputs import MAX_MESSAGE, is_canonical_name, unstorable
from ..ledger.need import EVERYONE, counted_words, need_words
from ..names import ERROR, EXPENSES, PayoutStatus, TicketStatus
from ..refusals import COMMANDS, Refusal
from ..refusals.answers import AlreadyDelivered, MessageTooLong, UnstorableMessage
from ..refusals.rules import NeedsApproval, UnusableUserId

REFUSAL_PREFIX = "Approval response not accepted: "
# Marks the agent's notes (refusals, news, progress): people see them, the model is not shown
# them again (turn_order.py leaves them out of its requests).
NOTE_MARK = "approval_guard_note"

# The actions a next step names, as people in a chat can take them: the CLI's, or the inbox page.
CHAT = replace(
    COMMANDS,
    inbox=f"the inbox ({EXPENSES} inbox, or the inbox page of make web)",
    decide=f"{EXPENSES} approve {{ticket}} --approver NAME, or the inbox page of make web",
    approve=f"{EXPENSES} approve {{ticket}} --approver NAME, or the inbox page of make web",
    approve_less="an amount and a reason",
    restart="start the app again",
)


def tool_error(refusal: Refusal) -> dict[str, Any]:
    """A tool's answer when the ledger refuses (the guard's `on_tool_error_callback`): what the model acts on and
    tells the user."""
    if isinstance(refusal, NeedsApproval):
        return {"status": PayoutStatus.NEEDS_APPROVAL.value, "reason": refusal.reason,
                "message": refusal.message, "next": refusal.next_for(CHAT)}
    return {"status": ERROR, "error": refusal.sentence(CHAT)}


def refused_answer(refusal: Refusal) -> str:
    """The agent's note for an approval response it does not accept."""
    said = refusal.sentence(CHAT)
    return REFUSAL_PREFIX + said[:1].lower() + said[1:]


def unacceptable(context: InvocationContext, message: types.Content) -> tuple[str, types.Content] | None:
    """A message this app does not take, as (the agent's note, what is stored instead)."""
    user_id = context.session.user_id
    if not is_canonical_name(user_id):
        return UnusableUserId(user_id).sentence(CHAT), record_of(message)
    size = sum(len(p.text or "") for p in message.parts or []) + sum(
        len(json.dumps(p.function_response.response, default=str)) for p in message.parts or [] if p.function_response
    )
    if unstorable([p.text for p in message.parts or []]) or unstorable(
            [p.function_response.response for p in message.parts or [] if p.function_response]):
        # PostgreSQL refuses NUL in text; under plain `adk` commands nothing stops it before the store.
        return UnstorableMessage().sentence(CHAT), types.Content(role="user", parts=[types.Part(
            text="(a message that cannot be stored)", thought=True)])
    if size > MAX_MESSAGE:
        return MessageTooLong(size, MAX_MESSAGE).sentence(CHAT), types.Content(role="user", parts=[types.Part(
            text=f"(a message of {size:,} characters, not stored)", thought=True)])
    return None


def record_of(message: types.Content) -> types.Content:
    """What was sent, as a thought: kept for people, never read by the model or ADK's resume."""
    responses = [p.function_response for p in message.parts or [] if p.function_response]
    if responses:
        sent = "; ".join(f"{r.name}: {json.dumps(r.response, default=str)}" for r in responses)
        return types.Content(role="user", parts=[types.Part(text=f"Answered {sent[:300]}", thought=True)])
    return message


# How a question starts when it has no question mark ("any news", "status").
_QUESTION_WORDS = frozenset({
    "any", "anything", "what", "what's", "whats", "when", "where", "why", "how", "who", "which", "is", "are", "has",
    "have", "did", "does", "do", "was", "were", "will", "can", "could", "status", "news", "update", "updates",
})


def asks(response: types.FunctionResponse) -> bool:
    """Whether the answer is a question ("any news?"), typed where ADK asks for the call's answer.

    `adk run`'s HITL prompt and the dev UI's answer box send it as `{"result": text}` (docs/security.md#the-guard).
    """
    payload = response.response
    if not isinstance(payload, dict) or set(payload) != {"result"} or not isinstance(payload["result"], str):
        return False
    text = payload["result"].strip().casefold()
    first = re.match(r"[a-z']+", text)
    return text.endswith("?") or (first is not None and first.group() in _QUESTION_WORDS)


async def news(ledger: Ledger, ticket: Ticket) -> str:
    """The ticket's state as the ledger knows it, for a question asked where its decision is awaited."""
    what = f"Ticket {ticket.id} ({ticket.amount_text} for {ticket.purpose})"
    if ticket.status is TicketStatus.PENDING:
        if ticket.approvals:
            by = f"; approved by {counted_words(ticket.counted_for)}" if ticket.counted_for else ""
            state = f"{what} waits for more approvals ({ticket.still_missing}{by})."
        elif ticket.needed != ((EVERYONE, 1),):
            state = f"{what} is still pending: it needs {need_words(ticket.needed)}."
        else:
            state = f"{what} is still pending: it waits for an approver."
        return f"{state} Only an approver decides it; ask again later for the news."
    payouts = await ledger.payouts.find(ticket_id=ticket.id)
    paid = (f"{payouts[0].amount_text} was paid (payout {payouts[0].id})" if payouts
            else "nothing has been paid" if ticket.status is TicketStatus.APPROVED else "nothing was paid")
    if ticket.status is TicketStatus.APPROVED:
        less = f" for {ticket.payable_text} of the {ticket.amount_text} asked" if ticket.changed else ""
        state = f"{what} was approved by {' and '.join(ticket.approvers)}{less}"
    elif ticket.status is TicketStatus.REJECTED:
        why = f" ({ticket.reason})" if ticket.reason else ""
        state = f"{what} was rejected by {ticket.decided_by}{why}"
    elif ticket.status is TicketStatus.WITHDRAWN:
        state = f"{what} was withdrawn by {ticket.decided_by}"
    else:
        state = f"{what} expired at {ticket.expires_at:%Y-%m-%d %H:%M} UTC without a decision"
    settled = f", then settled by {ticket.settled_by} without this conversation" if ticket.settled_at else ""
    return f"{state}{settled}: {paid}."


async def already_delivered(ledger: Ledger, ticket: Ticket) -> AlreadyDelivered:
    """A repeated answer to a decision that reached its conversation, with what the decision led to."""
    payouts = await ledger.payouts.find(ticket_id=ticket.id)
    outcome = f"{payouts[0].amount_text} was paid (payout {payouts[0].id})" if payouts else "nothing was paid"
    return AlreadyDelivered(ticket, f"{outcome}; this response was ignored")
