"""The agent's two tools: `ask_for_approval` (long-running) and `reimburse`.

`ask_for_approval` opens a ticket in the ledger and returns at once with
status "pending"; the decision arrives later as a FunctionResponse with the
same call id and name. `reimburse` asks the ledger, not the conversation,
whether money may be paid: above the threshold only an approved, unpaid
ticket for the same purpose and amount pays out.
"""

from __future__ import annotations

from typing import Any

from google.adk.tools import ToolContext

from . import ledger as ledger_module
from .conversations import locate
from .inputs import is_canonical_name
from .locks import Conversation
from .policy import PolicyError, needs_approval, parse_request, to_cents
from .settings import load_settings


async def ask_for_approval(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """Ask a human approver to approve a reimbursement that is above the limit.

    Returns immediately with status "pending" and a ticket_id. The decision
    ("approved", "rejected" or "expired") arrives later as an update to this
    same call; do not call this tool again for the same expense while it is
    pending.

    Args:
        purpose: What the expense was for, in the employee's words, e.g. "team lunch".
        amount: The amount to reimburse, in US dollars, e.g. 250.00.

    Returns:
        The ticket: status, ticket_id, purpose, amount, created_at and
        expires_at; or status "error" with a message to relay to the user.
    """
    settings = load_settings()
    try:
        clean_purpose, clean_amount = parse_request(purpose, amount, settings)
    except PolicyError as error:
        return {"status": "error", "error": str(error)}
    if not needs_approval(clean_amount, settings):
        return {
            "status": "error",
            "error": f"${clean_amount:,} is within the ${settings.approval_threshold:,} limit "
            "and needs no approval; call reimburse directly.",
        }
    session = tool_context.session
    if not is_canonical_name(session.user_id):
        return {"status": "error", "error": "This conversation's user id is not a plain lower-case name; "
                "approvals need one, so that the requester cannot be mistaken for an approver."}
    store = await locate(
        tool_context.get_invocation_context().session_service,
        app_name=session.app_name, app_database_url=settings.database_url,
    )
    ticket = await ledger_module.get_ledger(settings.database_url).open_ticket(
        app_name=session.app_name,
        user_id=session.user_id,
        session_id=session.id,
        call_id=tool_context.function_call_id or "",
        call_name="ask_for_approval",
        purpose=clean_purpose,
        amount_cents=to_cents(clean_amount),
        ttl=settings.approval_ttl,
        session_store=store,
    )
    return ticket.as_response()


async def reimburse(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """Pay an expense back to the employee.

    Amounts up to the approval limit are paid at once. Larger amounts are paid
    only after ask_for_approval for the same purpose and amount came back
    "approved"; otherwise this tool refuses.

    Args:
        purpose: What the expense was for; for an approved ticket, the ticket's purpose.
        amount: The amount in US dollars; for an approved ticket, the ticket's amount.

    Returns:
        The payout record (status "paid" or "already_paid", payout_id,
        purpose, amount, paid_at), or status "error" with the reason.
    """
    settings = load_settings()
    try:
        clean_purpose, clean_amount = parse_request(purpose, amount, settings)
    except PolicyError as error:
        return {"status": "error", "error": str(error)}
    ledger = ledger_module.get_ledger(settings.database_url)
    session = tool_context.session
    conversation = Conversation(session.app_name, session.user_id, session.id)
    call_id = tool_context.function_call_id or ""
    try:
        if needs_approval(clean_amount, settings):
            payout, already_paid = await ledger.pay_approved(
                conversation=conversation, call_id=call_id,
                purpose=clean_purpose, amount_cents=to_cents(clean_amount),
            )
        else:
            payout, already_paid = await ledger.pay_small(
                conversation=conversation, call_id=call_id,
                purpose=clean_purpose, amount_cents=to_cents(clean_amount),
            )
    except ledger_module.LedgerError as error:
        return {"status": "error", "error": str(error)}
    return payout.as_response(already_paid=already_paid)
