"""The long-running-tool pattern, bare: `ask_for_approval` waits for a person, then `reimburse` pays.

No ledger, no guard: whatever answer comes back for `ask_for_approval` is believed.
Run with (from the project folder):
    .venv/bin/python examples/bare/main.py    # steps 1 to 5 in a script
    .venv/bin/adk web examples/bare           # the same agent in ADK's dev UI
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.adk.tools.tool_context import ToolContext

from long_running_agent.model.offline import OFFLINE_MODEL_NAME  # registers the offline model with ADK

# The product's choice (long_running_agent/model/choice.py): AGENT_MODEL, else Gemini with a key, else offline.
MODEL = os.getenv("AGENT_MODEL") or (
    "gemini-3.5-flash" if os.getenv("GOOGLE_API_KEY") or os.getenv("GEMINI_API_KEY") else OFFLINE_MODEL_NAME)


def ask_for_approval(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """Ask a manager to approve a reimbursement above the limit.

    Args:
        purpose: What the expense was for.
        amount: The amount in US dollars.

    Returns:
        The ticket, with status "pending" until a manager decides.
    """
    # Returns at once: the decision comes later, as a new FunctionResponse for this same call.
    return {"status": "pending", "ticket_id": f"ticket-{tool_context.function_call_id}",
            "purpose": purpose, "amount": amount}


def reimburse(purpose: str, amount: float) -> dict[str, Any]:
    """Pay an expense back to the employee.

    Args:
        purpose: What the expense was for.
        amount: The amount in US dollars.

    Returns:
        The payout, with status "paid".
    """
    return {"status": "paid", "payout_id": f"payout-{uuid.uuid4().hex[:10]}", "purpose": purpose, "amount": amount}


root_agent = LlmAgent(
    name="expense_agent",
    model=MODEL,
    instruction="""You reimburse employees' expenses in US dollars. Up to $100: call reimburse.
Above: call ask_for_approval, then tell the user the ticket id and that it waits for a manager.
When a ticket comes back "approved", call reimburse with its purpose and amount; otherwise say
that nothing was paid.""",
    tools=[LongRunningFunctionTool(func=ask_for_approval), reimburse],
)
