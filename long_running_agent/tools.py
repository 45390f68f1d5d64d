"""The agent's tools: `ask_for_approval` (long-running), `reimburse` and `withdraw_request`.

`ask_for_approval` opens a ticket in the ledger and returns at once with
status "pending"; the decision arrives later as a FunctionResponse with the
same call id and name (main.py). The model may call it several times in one
turn, one ticket per expense; each is decided and delivered on its own.

`reimburse` asks the ledger, not the conversation, whether money may be paid:
above the threshold only an approved, unpaid ticket for the same purpose and
amount pays, what the approver approved and never more; within it, the daily
rules apply, and an amount they send to an approver is answered
"needs_approval", which `ask_for_approval` then accepts.

`withdraw_request` lets the requester withdraw a pending ticket from the chat.

Each tool makes one call to the ledger, which applies the policy
(ledger/ledger.py, ledger/policy.py). The ledger comes from the tool's run
(`approval_run`: what the approval guard hands every run, approval/run.py).
A refusal comes back as the tool's answer, in the words every surface shares
(refusals/). ADK turns each docstring into the declaration the model reads
on every turn, so they say only what the model needs.
"""

from __future__ import annotations

from typing import Any

from google.adk.tools.tool_context import ToolContext

from .approval.courier import answer_withdrawal
from .approval.notes import tool_error
from .approval.run import approval_run
from .names import TicketStatus
from .notifications import send_soon
from .refusals import Refusal


async def ask_for_approval(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """Open a ticket for an approver, one per expense.

    Args:
        purpose: What for.
        amount: In US dollars.
    """
    run = approval_run(tool_context)  # this run: the desk, and the conversation's store (approval/run.py)
    try:
        requested = await run.ledger.request_approval(await run.tool_call(tool_context), purpose=purpose,
                                                      amount=amount)
    except Refusal as refusal:
        return tool_error(refusal)
    send_soon(run.desk)  # approvers hear of it now, if a webhook is set (notifications.py)
    # Returned at once: the call stays pending until the decision answers it with the same id.
    return requested.as_response()  # {"status": "pending", "ticket_id": "T-..."}


async def reimburse(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """Pay an expense.

    Args:
        purpose: What for.
        amount: In US dollars.
    """
    run = approval_run(tool_context)
    try:
        # Whatever the conversation says: the ledger pays an approved ticket, or a small amount, once.
        payout, already_paid = await run.ledger.reimburse(await run.tool_call(tool_context), purpose=purpose,
                                                          amount=amount)
    except Refusal as refusal:
        return tool_error(refusal)
    return payout.as_response(already_paid=already_paid)


async def withdraw_request(ticket_id: str, tool_context: ToolContext) -> dict[str, Any]:
    """Withdraw a pending ticket.

    Args:
        ticket_id: Its id, T-...
    """
    run = approval_run(tool_context)
    try:
        ticket = await run.ledger.tickets.withdraw(str(ticket_id).strip(), requester=tool_context.session.user_id)
    except Refusal as refusal:
        return tool_error(refusal)
    await answer_withdrawal(run.desk, ticket, tool_context.get_invocation_context())  # the pending call is answered
    send_soon(run.desk)
    return {"status": TicketStatus.WITHDRAWN.value, "ticket_id": ticket.id}
