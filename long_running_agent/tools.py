"""The agent's tools: `ask_for_approval` (long-running), `reimburse` and `cancel_request`.

`ask_for_approval` opens a ticket in the ledger and returns at once with
status "pending"; the decision arrives later as a FunctionResponse with the
same call id and name. The model may call it several times in one turn, one
ticket per expense; each is decided and delivered on its own.

`reimburse` asks the ledger, not the conversation, whether money may be paid:
above the threshold only an approved, unpaid ticket for the same purpose and
amount pays out, and it pays what the approver approved (which may be less
than was asked), never more. Within the threshold the ledger's daily rules
apply (split purchases): a requester's payouts without approval are capped
per UTC day, and the same purpose twice in a day needs an approver;
`reimburse` then answers "needs_approval", and `ask_for_approval` accepts
that small amount.

`cancel_request` lets the requester withdraw a pending ticket from the chat.

The docstrings are what the model reads, in every request of every turn, so
they say only what the model needs; the responses likewise carry only what
the model acts on (the purpose and amount are in its own call). Everything
else is in the ledger (`python main.py show T-...`).
"""

from __future__ import annotations

from typing import Any

from google.adk.tools import ToolContext

from .approval.conversations import locate
from .approval.delivery import answer_withdrawal
from .approval.guard import delivering_now
from .approval.notes import tool_error
from .ledger import Conversation, Ticket
from .ledger.inputs import is_canonical_name
from .ledger.policy import (
    needs_approval,
    parse_request,
    purpose_key,
    requester_of,
    to_cents,
)
from .names import APPROVAL_TOOL
from .notifications import send_soon
from .refusals import NeedsNoApproval, Refusal, UnusableUserId
from .services import services
from .settings import Settings


def explain_combined(ticket: Ticket, others: list[Ticket], settings: Settings) -> str:
    """Why a ticket within DUAL_APPROVAL_ABOVE still needs two approvers, in words for the requester."""
    listed = ", ".join(f"{t.id} ({t.amount_text} for {t.purpose})" for t in others) or "your other requests"
    return (f"Together with {listed}, asked today or in the same message, this comes to "
            f"{ticket.combined_text}, above the ${settings.dual_approval_above:,} one approver may approve, "
            "so two approvers must approve it.")


def _daily_rules(user_id: str, purpose: str, settings: Settings) -> dict[str, Any]:
    return {
        "requester": requester_of(user_id),
        "purpose_key": purpose_key(purpose),
        "daily_limit_cents": to_cents(settings.daily_auto_approval_limit),
    }


async def ask_for_approval(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """Open a ticket for an approver, one per expense."""
    app = services()
    settings, ledger = app.settings, app.ledger
    try:
        clean_purpose, clean_amount = parse_request(purpose, amount, settings)
    except Refusal as refusal:
        return tool_error(refusal)
    session = tool_context.session
    if not is_canonical_name(session.user_id):
        return tool_error(UnusableUserId(session.user_id))
    why = note = None
    if not needs_approval(clean_amount, settings):
        daily = await ledger.payouts.auto_approval_refusal(
            amount_cents=to_cents(clean_amount), **_daily_rules(session.user_id, clean_purpose, settings)
        )
        if daily is None:
            return tool_error(NeedsNoApproval(clean_amount, settings.approval_threshold))
        why, note = daily.message, daily.why
    store = await locate(
        tool_context.get_invocation_context().session_service,
        app_name=session.app_name, app_database_url=settings.database_url,
    )
    ticket = await ledger.tickets.open(
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
        # The two-person rule: above DUAL_APPROVAL_ABOVE, alone or added to the same
        # purpose's requests today and to this message's other requests.
        message_id=tool_context.invocation_id,
        dual_above_cents=to_cents(settings.dual_approval_above),
    )
    if ticket.combined_cents is not None:
        why = explain_combined(ticket, await ledger.tickets.combined_with(ticket), settings)
    send_soon()  # approvers hear of it now, if a webhook is set (notifications.py)
    return ticket.as_response() | ({"why": why} if why else {})


async def reimburse(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """Pay an expense in US dollars."""
    app = services()
    settings, ledger = app.settings, app.ledger
    try:
        clean_purpose, clean_amount = parse_request(purpose, amount, settings)
    except Refusal as refusal:
        return tool_error(refusal)
    session = tool_context.session
    conversation = Conversation(session.app_name, session.user_id, session.id)
    call_id = tool_context.function_call_id or ""
    try:
        if needs_approval(clean_amount, settings):
            payout, already_paid = await ledger.payouts.pay_approved(
                conversation=conversation, call_id=call_id,
                purpose=clean_purpose, amount_cents=to_cents(clean_amount), prefer=delivering_now(),
            )
        else:
            payout, already_paid = await ledger.payouts.pay_small(
                conversation=conversation, call_id=call_id,
                purpose=clean_purpose, amount_cents=to_cents(clean_amount),
                **_daily_rules(session.user_id, clean_purpose, settings),
            )
    except Refusal as refusal:
        return tool_error(refusal)
    return payout.as_response(already_paid=already_paid)


async def cancel_request(ticket_id: str, tool_context: ToolContext) -> dict[str, Any]:
    """Withdraw the user's pending ticket when they ask to."""
    session = tool_context.session
    try:
        ticket = await services().ledger.tickets.cancel(str(ticket_id).strip(), requester=session.user_id)
    except Refusal as refusal:
        return tool_error(refusal)
    await answer_withdrawal(ticket, tool_context.get_invocation_context())
    send_soon()
    return {"status": "cancelled", "ticket_id": ticket.id}
