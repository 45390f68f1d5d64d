"""The expense agent: `ask_for_approval` is long-running, `reimburse` is not.

`adk web`, `adk api_server` and `adk run` load `app`: the agent plus the
approval guard plugin, on a desk built from the settings in `.env`
and the environment (desk.py) when first asked for, not at import. main.py,
the `expenses` CLI and `make web` build their own desk and call
`build_app(desk)`. The production parts plug in here: the tools' one call
each into the ledger (tools.py), the guard that checks every approval against
the ledger and hands the tools the desk (delivery/guard.py), the history the
model is shown (delivery/turn_order.py), and what a model that cannot be
reached becomes (model/failure.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models import BaseLlm
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools.long_running_tool import LongRunningFunctionTool

from .delivery.guard import ApprovalGuard
from .delivery.run import delivers_nothing
from .delivery.turn_order import prepare_model_request
from .desk import Desk, desk_or_exit
from .model.failure import model_failed
from .names import AGENT_NAME, APP_NAME
from .tools import ask_for_approval, reimburse, withdraw_request

INSTRUCTION = """You reimburse employees' expenses in US dollars. Each needs a purpose and an amount;
ask for what is missing. Up to ${threshold:,}: call reimburse. Above: call ask_for_approval, then tell
the user the ticket id and that it waits for an approver. Several expenses: one call each. An
expense may be at most ${most:,}. If reimburse answers "needs_approval", call ask_for_approval with
the same purpose and amount. When a ticket comes back "approved", call reimburse with its purpose
and the approved amount; otherwise say nothing was paid, and why. Never say money was paid unless
reimburse returned "paid"."""


def build_agent(desk: Desk, model: str | BaseLlm, *, answer_model_failures: bool = False) -> LlmAgent:
    """The expense agent, with the desk's policy in its instruction: its threshold and the most one request asks.

    `answer_model_failures`: a model that fails is the agent's answer (what to check), unless the run delivers a
    decision; for surfaces that would show the raised failure as a traceback or a plain-text 500 (plain adk).
    """
    return LlmAgent(
        name=AGENT_NAME,
        model=model,
        instruction=INSTRUCTION.format(threshold=desk.policy.rules.threshold, most=desk.policy.max_amount),
        tools=[LongRunningFunctionTool(func=ask_for_approval), reimburse, withdraw_request],
        # The conversation as the ledger knows it, in turns Gemini accepts (delivery/turn_order.py).
        before_model_callback=prepare_model_request,
        # A Gemini that cannot be reached or refuses: one refusal saying what to check (model/failure.py).
        on_model_error_callback=partial(model_failed, address=desk.settings.model.gemini_address,
                                        answer=delivers_nothing if answer_model_failures else None),
    )


def build_app(desk: Desk, *, model: str | BaseLlm | None = None, plugins: Sequence[BasePlugin] = (),
              answer_model_failures: bool = False) -> App:
    """The app every surface runs: the agent (on `model`, default the desk's choice) plus the approval guard.

    The guard checks every approval against the desk's ledger, and hands each run the desk (delivery/run.py).
    """
    agent = build_agent(desk, model or desk.model.name, answer_model_failures=answer_model_failures)
    return App(name=APP_NAME, root_agent=agent, plugins=[ApprovalGuard(desk), *plugins])


def __getattr__(name: str) -> Any:
    """`app` and `root_agent`, what `adk web`, `adk api_server` and `adk run` load, built when first asked for.

    Built on the settings in .env and the environment, answering a failed model with what to check. Importing this
    module reads no setting; asking for `app` with one it cannot use stops the program with one line naming it, as
    those commands would otherwise show a traceback. Your own code builds its app: `build_app(Desk(load_settings()))`.
    """
    if name not in ("app", "root_agent"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    built = desk_or_exit(partial(build_app, answer_model_failures=True), stop=True).app
    globals().update(app=built, root_agent=built.root_agent)  # built once: later reads find them here
    return globals()[name]
