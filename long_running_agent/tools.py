"""The agent's tools: `ask_for_approval` (long-running), `reimburse` and `cancel_request`.

`ask_for_approval` opens a ticket in the ledger and returns at once with
status "pending"; the decision arrives later as a FunctionResponse with the
same call id and name (main.py). The model may call it several times in one
turn, one ticket per expense; each is decided and delivered on its own.

`reimburse` asks the ledger, not the conversation, whether money may be paid:
above the threshold only an approved, unpaid ticket for the same purpose and
amount pays, what the approver approved and never more; within it, the daily
rules apply, and an amount they send to an approver is answered
"needs_approval", which `ask_for_approval` then accepts.

`cancel_request` lets the requester withdraw a pending ticket from the chat.

Each tool makes one call to the ledger, which applies the policy
(ledger/ledger.py, ledger/policy.py); a refusal comes back as the tool's
answer, in the words every surface shares (refusals.py). The docstrings are
what the model reads, in every request of every turn, so they say only what
the model needs; the responses likewise carry only what the model acts on.
"""

from __future__ import annotations

from typing import Any

from google.adk.tools import ToolContext

from .approval.conversations import tool_call
from .approval.courier import answer_withdrawal
from .approval.guard import delivering_now
from .approval.notes import tool_error
from .names import TicketStatus
from .notifications import send_soon
from .refusals import Refusal
from .services import services


async def ask_for_approval(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """Open a ticket for an approver, one per expense."""
    call = await tool_call(tool_context)  # the call's id, its conversation, and the store that keeps it
    try:
        requested = await services().ledger.request_approval(call, purpose=purpose, amount=amount)
    except Refusal as refusal:
        return tool_error(refusal)
    send_soon()  # approvers hear of it now, if a webhook is set (notifications.py)
    # Returned at once: the call stays pending until the decision answers it with the same id.
    return requested.as_response()  # {"status": "pending", "ticket_id": "T-..."}


async def reimburse(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """Pay an expense in US dollars."""
    call = await tool_call(tool_context)
    try:
        # Whatever the conversation says: the ledger pays an approved ticket, or a small amount, once.
        payout, already_paid = await services().ledger.reimburse(
            call, purpose=purpose, amount=amount, prefer=delivering_now())
    except Refusal as refusal:
        return tool_error(refusal)
    return payout.as_response(already_paid=already_paid)


async def cancel_request(ticket_id: str, tool_context: ToolContext) -> dict[str, Any]:
    """Withdraw the user's pending ticket when they ask to."""
    try:
        ticket = await services().ledger.tickets.cancel(str(ticket_id).strip(), requester=tool_context.session.user_id)
    except Refusal as refusal:
        return tool_error(refusal)
    await answer_withdrawal(ticket, tool_context.get_invocation_context())  # the pending call is answered
    send_soon()
    return {"status": TicketStatus.CANCELLED.value, "ticket_id": ticket.id}
