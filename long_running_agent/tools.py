"""The agent's tools: `ask_for_approval` (long-running), `reimburse` and `withdraw_request`.

As in ADK's long-running-tool sample, `ask_for_approval` returns at once with a pending ticket, and the
approver's decision answers its call later, as a FunctionResponse with the same id and name (main.py);
`reimburse` pays what the ledger allows. Each tool makes one call into the ledger, which holds the rules
(ledger/policy/) and raises a `Refusal` for what they refuse; the approval guard answers that for the
tool, in the words every surface shares (delivery/guard.py, refusals/). The ledger comes from the tool's
run (delivery/run.py). ADK turns each docstring into the declaration the model reads, so they say only
what the model needs.
"""

from __future__ import annotations

from typing import Any

from google.adk.tools.tool_context import ToolContext

from .delivery.run import approval_run
from .names import TicketStatus
from .notifications import send_soon


async def ask_for_approval(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """Open a ticket for an approver, one per expense.

    Args:
        purpose: What for.
        amount: In US dollars.
    """
    run = approval_run(tool_context)  # this run: the desk, and the conversation's store (delivery/run.py)
    # The ticket keeps this call's id: the decision comes back as the FunctionResponse with the same id.
    call = await run.tool_call(tool_context, call_id=tool_context.function_call_id)
    requested = await run.ledger.request_approval(call, purpose=purpose, amount=amount)
    send_soon(run.desk)  # approvers hear of it now, if a webhook is set (notifications.py)
    # Returned at once: the call stays pending until the decision answers it.
    return requested.as_response()  # {"status": "pending", "ticket_id": "T-..."}


async def reimburse(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """Pay an expense.

    Args:
        purpose: What for.
        amount: In US dollars.
    """
    run = approval_run(tool_context)
    call = await run.tool_call(tool_context, call_id=tool_context.function_call_id)
    # Whatever the conversation says: the ledger pays an approved ticket, or a small amount, once.
    payout, already_paid = await run.ledger.reimburse(call, purpose=purpose, amount=amount)
    return payout.as_response(already_paid=already_paid)  # {"status": "paid", ...}


async def withdraw_request(ticket_id: str, tool_context: ToolContext) -> dict[str, Any]:
    """Withdraw a pending ticket.

    Args:
        ticket_id: Its id, T-...
    """
    run = approval_run(tool_context)
    ticket = await run.ledger.tickets.withdraw(str(ticket_id).strip(), requester=tool_context.session.user_id)
    await run.courier.answer_withdrawal(ticket, tool_context.get_invocation_context())  # the pending call is answered
    send_soon(run.desk)
    return {"status": TicketStatus.WITHDRAWN.value, "ticket_id": ticket.id}
