"""The expense agent: `ask_for_approval` is long-running, `reimburse` is not.

`adk web`, `adk api_server` and `adk run` load `app`: the agent plus the
approval guard plugin; code that wants only the agent imports `root_agent`.
The production parts plug in here: the tools' one call each into the ledger
(tools.py), the guard that answers every approval call from the ledger
(approval/guard.py), the history the model is shown (approval/turn_order.py), and
what a model that cannot be reached becomes (model/failure.py).
main.py and `make web` hand `build_app` to the wiring (services.py).
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
from .approval.turn_order import prepare_model_request
from .model.choice import choose_model
from .model.failure import model_failed
from .names import AGENT_NAME, APP_NAME
from .settings import model_settings, settings
from .tools import ask_for_approval, cancel_request, reimburse


def instruction(_context: ReadonlyContext) -> str:
    limit = settings().approval_threshold
    return f"""You reimburse employees' expenses in US dollars. Each needs a purpose and an amount;
ask for what is missing. Up to ${limit:,}: call reimburse. Above: call ask_for_approval, then tell
the user the ticket id and that it waits for an approver. Several expenses: one call each.
If reimburse answers "needs_approval", call ask_for_approval with the same purpose and amount.
When a ticket comes back "approved", call reimburse with its purpose and the approved amount;
otherwise say nothing was paid, and why. Never say money was paid unless reimburse returned "paid"."""


root_agent = LlmAgent(
    name=AGENT_NAME,
    model=choose_model(model_settings()).name,
    instruction=instruction,
    tools=[LongRunningFunctionTool(func=ask_for_approval), reimburse, cancel_request],
    # The conversation as the ledger knows it, in turns Gemini accepts (approval/turn_order.py).
    before_model_callback=prepare_model_request,
    # A Gemini that cannot be reached or refuses: one refusal saying what to check (model/failure.py).
    on_model_error_callback=model_failed,
)


def build_app(*, model: str | BaseLlm | None = None, plugins: Sequence[BasePlugin] = ()) -> App:
    """The app every surface runs: the agent (with `model`, if given) plus the approval guard and `plugins`."""
    agent = root_agent if model in (None, root_agent.model) else root_agent.clone(update={"model": model})
    # The guard: an approval resumes the agent only as the ledger records it, and only once.
    return App(name=APP_NAME, root_agent=agent, plugins=[ApprovalGuard(), *plugins])


# What `adk web`, `adk api_server` and `adk run` load.
app = build_app()
