"""The expense agent: `ask_for_approval` is long-running, `reimburse` is not.

`adk web` and `adk api_server` discover `app` (the agent plus the approval
guard plugin); code that wants only the agent imports `root_agent`.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.adk.agents import LlmAgent
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.apps import App
from google.adk.models import BaseLlm
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools import LongRunningFunctionTool

from .approval.guard import ApprovalGuard
from .approval.turn_order import merge_consecutive_model_turns
from .model.choice import choose_model
from .settings import model_settings, settings
from .tools import ask_for_approval, reimburse

APP_NAME = "long_running_agent"  # ADK names an app after its folder; adk run files sessions under it


def instruction(_context: ReadonlyContext) -> str:
    limit = settings().approval_threshold
    return f"""You help employees get their expenses reimbursed, in US dollars.
You need the purpose and the amount; ask for whichever is missing.
Amounts up to ${limit:,} are paid directly: call reimburse.
Larger amounts need approval: call ask_for_approval once, then tell the user
the ticket id and that it is waiting for an approver. When reimburse answers
"needs_approval" (too much paid without approval today, or the same purpose
again), call ask_for_approval with the same purpose and amount, then tell the
user its "why" and the ticket id. When the ticket comes
back "approved", call reimburse with the same purpose and amount. When it is
"rejected" or "expired", explain that nothing was paid and why.
Never claim money was paid unless reimburse returned status "paid"."""


root_agent = LlmAgent(
    name="expense_agent",
    model=choose_model(model_settings()).name,
    description="Reimburses expenses; larger amounts wait for a human approver.",
    instruction=instruction,
    tools=[LongRunningFunctionTool(func=ask_for_approval), reimburse],
    # After a resume ADK can send two model turns in a row; Gemini refuses that.
    before_model_callback=merge_consecutive_model_turns,
)


def build_app(*, model: str | BaseLlm | None = None, plugins: Sequence[BasePlugin] = ()) -> App:
    """The app every surface runs: the agent (with `model`, if given) plus the approval guard and `plugins`."""
    agent = root_agent if model in (None, root_agent.model) else root_agent.clone(update={"model": model})
    return App(name=APP_NAME, root_agent=agent, plugins=[ApprovalGuard(), *plugins])


# What `adk web`, `adk api_server` and `adk run` load.
app = build_app()
