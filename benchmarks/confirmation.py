"""ADK's own tool confirmation, as a third system: `reimburse` waits for a "confirmed" above the limit.

The same offline model and the same paying `reimburse` as the seed's pattern
(baseline.py), but no `ask_for_approval`: the only tool is
`FunctionTool(reimburse, require_confirmation=above_the_limit)`, the tool
confirmation of ADK 2.11+. What ADK 2.13 does with it (read from
`google/adk/tools/function_tool.py` and `flows/llm_flows/tools/_confirmation.py`):

1. The model calls `reimburse`. ADK asks `above_the_limit` with the call's
   arguments; when it says yes, ADK does not run the tool: it answers the call
   with an error ("requires confirmation"), skips the model's summary, and ends
   the turn with a long-running `adk_request_confirmation` call whose args
   hold the original call (`originalFunctionCall`).
2. The client answers that call: a FunctionResponse with its id and name and
   `{"confirmed": true}` (`false` rejects). ADK checks the original call against
   the session, runs `reimburse` with the original arguments, and calls the
   model once more to tell the user.
3. The same confirmation sent again: ADK sees the original call already
   answered after the first confirmation and ends the invocation, running
   neither the tool nor the model.

No ledger, no approver identity, no expiry: whoever holds the conversation can
confirm. Sessions live in ADK's stock session services, as for the seed.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.flows.llm_flows.functions import REQUEST_CONFIRMATION_FUNCTION_CALL_NAME
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService
from google.adk.tools import FunctionTool, ToolContext

from long_running_agent.desk import policy_of
from long_running_agent.settings import Settings

from .baseline import Bank, paying_reimburse
from .environment import OFFLINE_MODEL

APP_NAME = "confirmation_baseline"
CONFIRMATION_CALL = REQUEST_CONFIRMATION_FUNCTION_CALL_NAME  # "adk_request_confirmation"
CONFIRMED = {"confirmed": True}


def instruction(limit: Decimal) -> str:
    # The shipped instruction names ask_for_approval, which this agent does not have.
    return f"""You help employees get their expenses reimbursed, in US dollars.
You need the purpose and the amount; ask for whichever is missing.
Then call reimburse with them. Amounts above ${limit:,} wait until an approver
confirms the call; you do not need to ask for that yourself.
Never claim money was paid unless reimburse returned status "paid"."""


def above(limit: Decimal) -> Callable[..., bool]:
    """ADK's question before each `reimburse` call: does this one need a confirmation (above `limit`)?"""

    def above_the_limit(purpose: str, amount: float, tool_context: ToolContext) -> bool:
        return Decimal(str(amount)) > limit

    return above_the_limit


def confirmation_agent(bank: Bank, settings: Settings) -> LlmAgent:
    """ADK's confirmation above the threshold of `settings`, the one this project's agent applies."""
    limit = policy_of(settings).rules.threshold
    return LlmAgent(
        name="expense_agent",
        model=OFFLINE_MODEL,
        instruction=instruction(limit),
        tools=[FunctionTool(paying_reimburse(bank), require_confirmation=above(limit))],
    )


def confirmation_runner(bank: Bank, session_service: BaseSessionService, settings: Settings) -> Runner:
    return Runner(app=App(name=APP_NAME, root_agent=confirmation_agent(bank, settings)),
                  session_service=session_service)
