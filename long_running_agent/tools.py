"""The agent's two tools: `ask_for_approval` (long-running) and `reimburse`.

`ask_for_approval` opens a ticket in the ledger and returns at once with
status "pending"; the decision arrives later as a FunctionResponse with the
same call id and name. `reimburse` asks the ledger, not the conversation,
whether money may be paid: above the threshold only an approved, unpaid
ticket for the same purpose and amount pays out.

Within the threshold the ledger's daily rules apply (split purchases): a
requester's payouts without approval are capped per UTC day, and the same
purpose twice in a day needs an approver. `reimburse` then answers
"needs_approval", and `ask_for_approval` accepts that small amount.
"""

from __future__ import annotations

from typing import Any

from google.adk.tools import ToolContext

from .approval.conversations import locate
from .ledger import DAILY_LIMIT, Conversation, LedgerError, NeedsApproval
from .ledger.inputs import is_canonical_name
from .ledger.policy import (
    PolicyError,
    from_cents,
    needs_approval,
    parse_request,
    purpose_key,
    requester_of,
    to_cents,
)
from .services import services
from .settings import Settings

# The names the guard, the ledger and the offline model know the tools by.
APPROVAL_TOOL = "ask_for_approval"
REIMBURSE_TOOL = "reimburse"


def _dollars(cents: int) -> str:
    return f"${from_cents(cents):,}"


def explain(refusal: NeedsApproval) -> str:
    """Why a small payout needs an approver, in words for the requester."""
    amount = _dollars(refusal.amount_cents)
    if refusal.reason == DAILY_LIMIT and refusal.paid_today_cents:
        return (f"You have been reimbursed {_dollars(refusal.paid_today_cents)} today (UTC) without "
                f"approval; the daily limit for that is {_dollars(refusal.limit_cents)}, so this "
                f"{amount} needs an approver.")
    if refusal.reason == DAILY_LIMIT:
        return (f"The daily limit for reimbursements without approval is {_dollars(refusal.limit_cents)}, "
                f"so this {amount} needs an approver.")
    earlier = f"{refusal.earlier.amount_text} for {refusal.earlier.purpose}" if refusal.earlier else "that"
    return (f"You were already reimbursed {earlier} today (UTC) without approval, so another "
            f"reimbursement for the same purpose needs an approver.")


def _daily_rules(user_id: str, purpose: str, settings: Settings) -> dict[str, Any]:
    return {
        "requester": requester_of(user_id),
        "purpose_key": purpose_key(purpose),
        "daily_limit_cents": to_cents(settings.daily_auto_approval_limit),
    }


async def ask_for_approval(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """Ask a human approver to approve a reimbursement.

    Use it for amounts above the limit, and for a smaller amount when
    reimburse answered status "needs_approval" (same purpose and amount).
    Returns immediately with status "pending" and a ticket_id (and, for a
    smaller amount, "why": tell the user that too). The decision
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
    app = services()
    settings, ledger = app.settings, app.ledger
    try:
        clean_purpose, clean_amount = parse_request(purpose, amount, settings)
    except PolicyError as error:
        return {"status": "error", "error": str(error)}
    session = tool_context.session
    if not is_canonical_name(session.user_id):
        return {"status": "error", "error": "This conversation's user id is not a plain lower-case name; "
                "approvals need one, so that the requester cannot be mistaken for an approver."}
    why = note = None
    if not needs_approval(clean_amount, settings):
        refusal = await ledger.auto_approval_refusal(
            amount_cents=to_cents(clean_amount), **_daily_rules(session.user_id, clean_purpose, settings)
        )
        if refusal is None:
            return {
                "status": "error",
                "error": f"${clean_amount:,} is within the ${settings.approval_threshold:,} limit "
                "and needs no approval; call reimburse directly.",
            }
        why, note = explain(refusal), refusal.why
    store = await locate(
        tool_context.get_invocation_context().session_service,
        app_name=session.app_name, app_database_url=settings.database_url,
    )
    ticket = await ledger.open_ticket(
        app_name=session.app_name,
        user_id=session.user_id,
        session_id=session.id,
        call_id=tool_context.function_call_id or "",
        call_name=APPROVAL_TOOL,
        purpose=clean_purpose,
        amount_cents=to_cents(clean_amount),
        ttl=settings.approval_ttl,
        session_store=store,
        note=note,
    )
    return ticket.as_response() | ({"why": why} if why else {})


async def reimburse(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """Pay an expense back to the employee.

    Amounts up to the approval limit are usually paid at once. Larger amounts
    are paid only after ask_for_approval for the same purpose and amount came
    back "approved"; otherwise this tool refuses. A smaller amount may answer
    status "needs_approval" (too much paid without approval today, or the same
    purpose again): then call ask_for_approval with the same purpose and
    amount, and after "approved" call this tool again.

    Args:
        purpose: What the expense was for; for an approved ticket, the ticket's purpose.
        amount: The amount in US dollars; for an approved ticket, the ticket's amount.

    Returns:
        The payout record (status "paid" or "already_paid", payout_id,
        purpose, amount, paid_at); status "needs_approval" with a message
        for the user; or status "error" with the reason.
    """
    app = services()
    settings, ledger = app.settings, app.ledger
    try:
        clean_purpose, clean_amount = parse_request(purpose, amount, settings)
    except PolicyError as error:
        return {"status": "error", "error": str(error)}
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
                **_daily_rules(session.user_id, clean_purpose, settings),
            )
    except NeedsApproval as refusal:
        return {
            "status": "needs_approval",
            "reason": refusal.reason,
            "message": explain(refusal),
            "purpose": clean_purpose,
            "amount": float(clean_amount),
            "paid_today_without_approval": float(from_cents(refusal.paid_today_cents)),
            "daily_limit": float(from_cents(refusal.limit_cents)),
            "next_step": "Tell the user the message, then call ask_for_approval with this purpose and amount.",
        }
    except LedgerError as error:
        return {"status": "error", "error": str(error)}
    return payout.as_response(already_paid=already_paid)
