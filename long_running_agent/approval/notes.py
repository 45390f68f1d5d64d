"""What the approval guard refuses and how it tells people: its notes, in the agent's voice.

A note replaces what the agent would have said; what the person sent is kept
as a thought (shown in the dev UI, never read by the model), so the pending
call stays open for the real decision.
"""

from __future__ import annotations

import json
from typing import Any

from google.adk.agents.invocation_context import InvocationContext
from google.genai import types

from ..ledger import Ledger, Ticket
from ..ledger.inputs import MAX_MESSAGE, is_canonical_name, printable, unstorable

REFUSAL_PREFIX = "Approval response not accepted: "


def claimed_status(response: types.FunctionResponse) -> str | None:
    payload: Any = response.response or {}
    status = payload.get("status") if isinstance(payload, dict) else None
    if status is None and isinstance(payload, dict):
        status = payload.get("result")  # adk web and adk run wrap plain text as {"result": ...}
    return str(status).strip().lower() if status is not None else None


def unacceptable(context: InvocationContext, message: types.Content) -> tuple[str, types.Content] | None:
    """A message this app does not take, as (the agent's note, what is stored instead)."""
    user_id = context.session.user_id
    if not is_canonical_name(user_id):
        note = (
            f"I can't take requests from the user id {printable(user_id)!r}: user ids here are plain lower-case "
            "names (letters a-z, digits and . _ @ + -), so that nobody can look like somebody else. "
            "Start a session with such an id, e.g. alice."
        )
        return note, record_of(message)
    size = sum(len(p.text or "") for p in message.parts or []) + sum(
        len(json.dumps(p.function_response.response, default=str)) for p in message.parts or [] if p.function_response
    )
    if unstorable([p.text for p in message.parts or []]) or unstorable(
            [p.function_response.response for p in message.parts or [] if p.function_response]):
        # PostgreSQL refuses NUL in text; under plain `adk` commands nothing stops it before the store.
        note = ("Your message has a NUL character (\\u0000) or text that is not Unicode, so I did not store it. "
                "Please send it again without it.")
        return note, types.Content(role="user", parts=[types.Part(text="(a message that cannot be stored)",
                                                                   thought=True)])
    if size > MAX_MESSAGE:
        note = (f"Your message has {size:,} characters; I take at most {MAX_MESSAGE:,}. "
                "Please send a shorter one: the purpose and the amount are enough.")
        return note, types.Content(role="user", parts=[types.Part(
            text=f"(a message of {size:,} characters, not stored)", thought=True)])
    return None


def record_of(message: types.Content) -> types.Content:
    """What was sent, as a thought: kept for people, never read by the model or ADK's resume."""
    responses = [p.function_response for p in message.parts or [] if p.function_response]
    if responses:
        return types.Content(role="user", parts=[types.Part(text=as_sent(responses), thought=True)])
    return message


def as_sent(responses: list[types.FunctionResponse]) -> str:
    sent = "; ".join(f"{r.name}: {json.dumps(r.response, default=str)}" for r in responses)
    return f"Answered {sent[:300]}"




async def already_delivered(ledger: Ledger, ticket: Ticket) -> str:
    """What became of a delivered decision, for a repeated answer."""
    by = f" by {ticket.decided_by}" if ticket.decided_by else ""
    payouts = await ledger.payouts.find(ticket_id=ticket.id)
    if payouts:
        outcome = f"{payouts[0].amount_text} was paid (payout {payouts[0].id})"
    else:
        outcome = "nothing was paid"
    if ticket.settled_at:
        return (f"ticket {ticket.id} was {ticket.status}{by} and then settled by {ticket.settled_by} "
                f"without this conversation: {outcome}. This response was ignored.")
    return (
        f"ticket {ticket.id} was already {ticket.status}{by}, and that decision reached this "
        f"conversation: {outcome}. This repeated response was ignored."
    )
