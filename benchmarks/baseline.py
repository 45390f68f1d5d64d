"""The seed's pattern, as the baseline: the bare example's agent (examples/bare/), and nothing around it.

The example's `ask_for_approval` (it just answers "pending") and `reimburse`
(it just answers "paid") on the offline model. Two changes, both for the
measuring: the agent gets this project's instruction, so that the two agents
send the model the same words, and each payout is counted, per session, in a
`Bank`. There is no ledger and no guard, and the sessions live in one of
ADK's stock session services. The application resumes by sending the
approval as a FunctionResponse with the pending call's id and name, as the
example's main.py does.

On each store the seed's pattern runs on the session service this project
runs on (`SESSION_SERVICES`), so that a ratio between the two measures this
project, not ADK: InMemorySessionService in memory, DatabaseSessionService
on a SQLite file and on PostgreSQL. ADK's SqliteSessionService, which a copy
of the example may use on a SQLite file, is measured beside them for
information (`SQLITE_SERVICE`).
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
from long_running_agent.desk import Desk
from long_running_agent.settings import Settings

from .environment import OFFLINE_MODEL

APP_NAME = "seed_baseline"
SESSION_SERVICES = {"memory": "InMemorySessionService", "sqlite": "DatabaseSessionService",
                    "postgres": "DatabaseSessionService"}
SQLITE_SERVICE = "SqliteSessionService"


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
        "instruction": build_agent(Desk(settings), OFFLINE_MODEL).instruction,
        "tools": [paying_reimburse(bank) if tool is bare.reimburse else tool for tool in bare.root_agent.tools],
    })


def stock_session_service(store: str, url: str | None, service: str | None = None) -> BaseSessionService:
    """ADK's own session service on `store`: `service`, by default the one this project uses there."""
    if store == "memory":
        return InMemorySessionService()
    assert url is not None
    if service == SQLITE_SERVICE:
        return SqliteSessionService(url.split(":///", 1)[1])
    return DatabaseSessionService(db_url=url)


def seed_runner(bank: Bank, session_service: BaseSessionService, settings: Settings) -> Runner:
    return Runner(app=App(name=APP_NAME, root_agent=seed_agent(bank, settings)), session_service=session_service)
