"""The seed's pattern, as the baseline: a long-running tool and nothing around it.

A plain `LongRunningFunctionTool` agent on the same offline model and the same
instruction. `ask_for_approval` just answers "pending" and `reimburse` just
answers "paid" (counting each payout); there is no ledger and no guard, and the
sessions live in one of ADK's stock session services. The application resumes
by sending the approval as a FunctionResponse with the pending call's id and
name, as ADK's human-in-the-loop sample does.
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
from google.adk.tools import LongRunningFunctionTool, ToolContext

from long_running_agent.agent import build_agent
from long_running_agent.settings import Settings

from .environment import OFFLINE_MODEL

APP_NAME = "seed_baseline"


class Bank:
    """What the baseline paid, per session: the only way to see a double payout."""

    def __init__(self) -> None:
        self.payouts: Counter[str] = Counter()


def paying_reimburse(bank: Bank) -> Callable[..., dict[str, Any]]:
    """The baseline's `reimburse`: pays whatever it is asked to, counting each payout in `bank`."""

    def reimburse(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
        """Pay an expense back to the employee.

        Args:
            purpose: What the expense was for.
            amount: The amount in US dollars.

        Returns:
            The payout, with status "paid".
        """
        session_id = tool_context.session.id
        bank.payouts[session_id] += 1
        return {
            "status": "paid",
            "payout_id": f"payout-{session_id[:8]}-{bank.payouts[session_id]}",
            "purpose": purpose,
            "amount": amount,
        }

    return reimburse


def seed_agent(bank: Bank, settings: Settings) -> LlmAgent:
    """The seed's agent, with the instruction this project's agent has under `settings` (agent.py)."""

    def ask_for_approval(purpose: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
        """Ask a manager to approve a reimbursement above the limit.

        Args:
            purpose: What the expense was for.
            amount: The amount in US dollars.

        Returns:
            The ticket, with status "pending" until a manager decides.
        """
        return {
            "status": "pending",
            "ticket_id": f"ticket-{tool_context.function_call_id}",
            "purpose": purpose,
            "amount": amount,
        }

    return LlmAgent(
        name="expense_agent",
        model=OFFLINE_MODEL,
        instruction=build_agent(settings, OFFLINE_MODEL).instruction,
        tools=[LongRunningFunctionTool(func=ask_for_approval), paying_reimburse(bank)],
    )


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
