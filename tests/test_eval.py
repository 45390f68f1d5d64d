"""ADK's evaluation of the agent (long_running_agent/eval/, docs/testing.md), offline.

The eval set runs through ADK's own `AgentEvaluator` with the offline model,
on the test's desk (its SQLite ledger, DEV_CHAT_APPROVAL on as the set needs):
the evaluator takes the app from `long_running_agent.eval`'s `agent` module,
so the test puts an app built on its desk there; the
evaluator asserts the tool trajectories itself, and the ledger shows the
resume turns went through the real protocol. `adk eval` runs the set too,
as docs/testing.md shows it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import pytest
from google.adk.apps import App
from google.adk.evaluation.agent_evaluator import AgentEvaluator
from google.adk.models import LlmRequest, LlmResponse
from support.desks import TestDesk
from support.evals import EVAL_SET, documented, run_documented_adk_eval

from long_running_agent.agent import build_app
from long_running_agent.eval import agent as evaluated
from long_running_agent.eval.resume_turns import EvalSetupError, check_chat_approval, check_ledger, settings_of
from long_running_agent.ledger import TicketStatus
from long_running_agent.ledger.storage.engine import DEFAULT_DATABASE_URL
from long_running_agent.model.offline import OfflineExpenseModel


def evaluating(monkeypatch, app: App) -> None:
    """Have the evaluator load `app`: it takes `app` and `root_agent` from the eval package's `agent` module."""
    monkeypatch.setattr(evaluated, "app", app)
    monkeypatch.setattr(evaluated, "root_agent", app.root_agent)


async def evaluate() -> None:
    # One run: the offline model gives the same answers every time, and a second
    # run on the same ledger would meet the daily rules (the same taxi twice).
    await AgentEvaluator.evaluate("long_running_agent.eval", str(EVAL_SET), num_runs=1)


async def test_eval_set_passes_offline_and_its_resumes_go_through_the_ledger(desk, configure, monkeypatch):
    configure(dev_chat_approval=True)
    evaluating(monkeypatch, desk.app)

    await evaluate()

    ledger = desk.ledger
    paid = {(p.purpose, p.amount_cents): p for p in await ledger.payouts.find()}
    assert set(paid) == {("taxi", 4_500), ("team lunch", 25_000)}
    [approved] = await ledger.tickets.with_status(TicketStatus.APPROVED)
    assert paid[("team lunch", 25_000)].ticket_id == approved.id
    assert approved.decided_by == "alice (chat, DEV_CHAT_APPROVAL)" and approved.delivered_at
    [rejected] = await ledger.tickets.with_status(TicketStatus.REJECTED)
    assert (rejected.purpose, rejected.amount_cents) == ("client dinner", 18_000) and rejected.delivered_at
    # The case that stops at the request leaves its ticket waiting.
    [pending] = await ledger.tickets.with_status(TicketStatus.PENDING)
    assert (pending.purpose, pending.amount_cents) == ("team lunch", 25_000)


class PaysWithoutAsking(OfflineExpenseModel):
    """The offline model, broken: it calls reimburse where it should ask for approval."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        async for response in super().generate_content_async(llm_request, stream):
            for part in response.content.parts if response.content and response.content.parts else []:
                if part.function_call and part.function_call.name == "ask_for_approval":
                    part.function_call.name = "reimburse"
            yield response


async def test_eval_set_fails_when_the_model_pays_without_asking(desk, configure, monkeypatch):
    configure(dev_chat_approval=True)
    evaluating(monkeypatch, build_app(desk, model=PaysWithoutAsking()))

    with pytest.raises(AssertionError, match="tool_trajectory_avg_score for long_running_agent.eval Failed"):
        await evaluate()

    # The ledger refused the large amounts all the same: only the taxi was paid.
    assert [(p.purpose, p.amount_cents) for p in await desk.ledger.payouts.find()] == [("taxi", 4_500)]


def test_eval_refuses_to_run_without_chat_approval_or_on_the_apps_ledger(desk: TestDesk, configure):
    # The evaluator checks the settings of the app it evaluates: its approval guard's desk's.
    assert settings_of(desk.runner()) is desk.settings
    with pytest.raises(EvalSetupError, match="DEV_CHAT_APPROVAL=true"):
        check_chat_approval(desk.settings)
    configure(database_url=DEFAULT_DATABASE_URL)
    with pytest.raises(EvalSetupError, match="EXPENSES_DATABASE_URL"):
        check_ledger(desk.settings)


@pytest.mark.subprocess
def test_documented_adk_eval_command_passes_offline(tmp_path):
    result = run_documented_adk_eval("adk eval, offline", tmp_path)

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert documented("output", "adk eval") in result.stdout
