"""The seed's pattern, as the baseline: the bare example's agent (examples/bare/), and nothing around it.

The example's `ask_for_approval` (it just answers "pending") and `reimburse`
(it just answers "paid") on the offline model. Two changes, both for the
measuring: the agent gets this project's instruction, so that the two agents
send the model the same words, and each payout is counted, per session, in a
`Bank`. There is no ledger and no guard, and the sessions live in one of
ADK's stock session services. The application resumes by sending the
approval as a FunctionResponse with the pending call's id and name, as the
example's main.py does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, DatabaseSessionService, InMemorySessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.adk.tools.tool_context import ToolContext

from examples.bare.expense_agent import agent as bare
from long_running_agent.agent import build_agent
from long_running_agent.settings import Settings

from .environment import OFFLINE_MODEL

APP_NAME = "seed_baseline"


class Bank:
    """What the baseline paid, per session: the only way to see a double payout."""

    def __init__(self) -> None:
        self.payouts: Counter[str] = Counter()


def paying_reimburse(bank: Bank) -> Callable[..., dict[str, Any]]:
    """The example's `reimburse`, counting each payout in `bank`."""

    def reimburse(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
        bank.payouts[tool_context.session.id] += 1
        return bare.reimburse(purpose, amount)

    # ADK builds the tool's declaration from the docstring: the model reads the example's own.
    reimburse.__doc__ = bare.reimburse.__doc__
    return reimburse


def seed_agent(bank: Bank, settings: Settings) -> LlmAgent:
    """The example's agent on the offline model, with the instruction this project's agent has under `settings`."""
    return bare.root_agent.clone(update={
        "model": OFFLINE_MODEL,
        "instruction": build_agent(settings, OFFLINE_MODEL).instruction,
        "tools": [paying_reimburse(bank) if tool is bare.reimburse else tool for tool in bare.root_agent.tools],
    })


def stock_session_service(store: str, url: str | None) -> BaseSessionService:
    """ADK's own session service for `store`: memory, sqlite (SqliteSessionService), postgres."""
    if store == "memory":
        return InMemorySessionService()
    if store == "sqlite":
        assert url is not None
        return SqliteSessionService(url.split(":///", 1)[1])
    assert url is not None
    return DatabaseSessionService(db_url=url)


def seed_runner(bank: Bank, session_service: BaseSessionService, settings: Settings) -> Runner:
    return Runner(app=App(name=APP_NAME, root_agent=seed_agent(bank, settings)), session_service=session_service)
