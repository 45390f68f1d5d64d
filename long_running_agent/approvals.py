"""Deciding a ticket and resuming its conversation: ledger first, then the agent.

Used by the approver CLI (`python main.py approve|reject`) and the inbox
server. The FunctionResponse is rebuilt from the ledger's stored call id and
name, so a decision made days later, in another process, resumes the right
call in the right session.
"""

from __future__ import annotations

from google.adk.events import Event
from google.adk.runners import Runner
from google.genai import types

from .ledger import Ledger, Ticket, TicketExpired


def decision_message(ticket: Ticket) -> types.Content:
    """The updated FunctionResponse for `ticket`: same id and name as the original call."""
    return types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    id=ticket.call_id, name=ticket.call_name, response=ticket.as_response()
                )
            )
        ],
    )


async def resume(runner: Runner, ticket: Ticket) -> list[Event]:
    """Deliver the ledger's decision to the waiting agent and run it to the end."""
    return [
        event
        async for event in runner.run_async(
            user_id=ticket.user_id, session_id=ticket.session_id, new_message=decision_message(ticket)
        )
    ]


async def decide_and_resume(
    runner: Runner,
    ledger: Ledger,
    ticket_id: str,
    *,
    approver: str,
    approve: bool,
    reason: str | None = None,
) -> tuple[Ticket, list[Event]]:
    """Record the decision, then resume the agent; raises LedgerError if refused.

    An expired ticket is refused, but its conversation is still resumed with
    status "expired" so the requester learns what happened.
    """
    try:
        ticket = await ledger.decide(ticket_id, approver=approver, approve=approve, reason=reason)
    except TicketExpired:
        await resume(runner, await ledger.get(ticket_id))
        raise
    return ticket, await resume(runner, ticket)
