"""A decision as the agent receives it: the FunctionResponse built from the ledger's record, and the check of one.

A response agrees when every field the ledger knows says what the ledger says, an amount read by the rule `reimburse`
reads amounts with; a field it does not know passes as sent, authority for nothing, since `reimburse` pays only what
the ledger approved (docs/security.md#the-guard).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from google.adk.sessions import Session
from google.genai import types

from ..ledger import Ticket, TicketStatus
from ..ledger.inputs import AmountError, amount, from_cents
from ..ledger.policy.rules import Policy


def decision_message(ticket: Ticket) -> types.Content:
    """The ledger's record of `ticket` as its call's answer (same id and name), alone in a user message as ADK wants."""
    response = types.FunctionResponse(id=ticket.call_id, name=ticket.call_name, response=ticket.as_response())
    return types.Content(role="user", parts=[types.Part(function_response=response)])


def claimed_status(response: types.FunctionResponse) -> str | None:
    """The status a response claims: its `status`, or what was typed (`adk web` and `adk run` send {"result": ...})."""
    payload: Any = response.response or {}
    status = payload.get("status") if isinstance(payload, dict) else None
    if status is None and isinstance(payload, dict):
        status = payload.get("result")
    return str(status).strip().lower() if status is not None else None


def _ledger_says(ticket: Ticket) -> dict[str, Any]:
    """What the ledger holds for each field a response may claim."""
    by = " and ".join(ticket.approvers) if ticket.status is TicketStatus.APPROVED else ticket.decided_by
    return {
        "ticket_id": ticket.id, "amount": from_cents(ticket.payable_cents), "asked": from_cents(ticket.amount_cents),
        "by": by, "reason": ticket.reason, "approvals": ticket.approvals_so_far,
    }


def _same(claimed: Any, held: Any, policy: Policy) -> bool:
    """Whether `claimed` says `held`; an amount the rule refuses raises AmountError."""
    if isinstance(held, Decimal):
        # The model passes the amount it is shown on to `reimburse`: read by any other rule, a spelling
        # such as "2e2" would agree here and be refused there, and the run would end with nothing paid.
        return amount(claimed, most=policy.max_amount) == held
    return bool(claimed == held)


def disagreement(
    response: types.FunctionResponse, call: types.FunctionCall, ticket: Ticket, policy: Policy
) -> str | None:
    """What `response` says that the ledger does not, in words naming both; None when it agrees.

    `policy`: the one `reimburse` reads amounts under (at most its max_amount, ledger/inputs.py's `amount`).
    """
    if response.name != call.name:
        return f"it names the call {response.name!r}, but call {call.id} is {call.name!r}"
    claimed = claimed_status(response)
    if claimed != ticket.status.value:
        return (f"it says {claimed!r}, but the ledger has ticket {ticket.id} {ticket.status}" if claimed
                else f"it says no status, but the ledger has ticket {ticket.id} {ticket.status}")
    payload: Any = response.response or {}
    for field, held in _ledger_says(ticket).items():
        if field not in payload:
            continue
        shown = f"${held:,}" if isinstance(held, Decimal) else repr(held)
        try:
            same = _same(payload[field], held, policy)
        except AmountError as error:
            return (f"its {field} is {payload[field]!r}, which reimburse would refuse ({str(error).rstrip('.')}); "
                    f"the ledger's is {shown} (ticket {ticket.id})")
        if not same:
            return f"its {field} is {payload[field]!r}, but the ledger's is {shown} (ticket {ticket.id})"
    return None


def stored_call(session: Session, call_id: str | None) -> types.FunctionCall | None:
    """The function call `call_id` as the session holds it (ADK matches a response on its id alone)."""
    for event in reversed(session.events):
        for call in event.get_function_calls():
            if call.id == call_id:
                return call
    return None


def holds_call(session: Session, call_id: str) -> bool:
    """Whether `session` holds the function call `call_id`: ADK resumes only a call the session holds."""
    return stored_call(session, call_id) is not None


def call_gone(ticket: Ticket, where: str = "") -> str:
    """Why a decision cannot reach a conversation that exists but no longer holds the ticket's call."""
    place = f" in {where}" if where else ""
    return (f"conversation {ticket.session_id} of {ticket.user_id}{place} no longer holds the call "
            f"{ticket.call_id} that ticket {ticket.id} answers (it was deleted and started again)")
