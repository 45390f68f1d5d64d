"""The seed pattern reads top to bottom: short tools, each one call into the ledger, which holds the policy.

agent.py, tools.py and main.py (the demo) are the tutorial; the rules (the
threshold, the daily rules, the two-person rule, who may ask) are the
ledger's, so a tool's body is a few lines and the ledger refuses what the
policy refuses whichever surface calls it. A tool reaches the ledger through
its run (`run = approval_run(tool_context)`, delivery/run.py), not a global.
"""

from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace

import pytest
from support.processes import ROOT

from long_running_agent.delivery.guard import ApprovalGuard
from long_running_agent.delivery.notes import CHAT, tool_error
from long_running_agent.ledger import Conversation, Ledger, NeedsApproval, NotApproved, ToolCall
from long_running_agent.ledger.inputs import InputError
from long_running_agent.ledger.policy.rules import Policy
from long_running_agent.refusals.rules import NeedsNoApproval, TicketNotFound, UnusableUserId

TUTORIAL = [ROOT / "long_running_agent" / "agent.py", ROOT / "long_running_agent" / "tools.py", ROOT / "main.py"]


def test_the_tutorial_path_is_short():
    lines = sum(len(path.read_text().splitlines()) for path in TUTORIAL)
    assert lines <= 300, f"agent.py + tools.py + main.py have {lines} lines"


async def test_a_refusal_a_tool_raises_is_its_answer_in_the_chats_words_and_a_bug_stays_raised():
    guard, tool = ApprovalGuard(desk=None), SimpleNamespace(name="withdraw_request")
    refused = TicketNotFound("T-000000000000")

    answer = await guard.on_tool_error_callback(tool=tool, tool_args={}, tool_context=None, error=refused)

    assert answer == tool_error(refused) == {"status": "error", "error": refused.sentence(CHAT)}
    assert await guard.on_tool_error_callback(tool=tool, tool_args={}, tool_context=None, error=KeyError("x")) is None


def call_of(user: str = "alice", call_id: str = "adk-1", message: str | None = "message-1") -> ToolCall:
    return ToolCall(Conversation("long_running_agent", user, "s-1"), call_id=call_id, message_id=message)


@pytest.fixture
async def ledger(db_url):
    ledger = Ledger(db_url, policy=Policy(daily_auto_approval_limit=Decimal("50")))
    yield ledger
    await ledger.close()


async def test_the_ledger_opens_a_ticket_above_the_threshold_and_refuses_one_below(ledger):
    requested = await ledger.request_approval(call_of(), purpose="team lunch", amount=250)
    assert requested.as_response() == {"status": "pending", "ticket_id": requested.ticket.id}
    assert (requested.ticket.call_id, requested.ticket.call_name, requested.ticket.amount_cents) == (
        "adk-1", "ask_for_approval", 25_000)

    with pytest.raises(NeedsNoApproval):
        await ledger.request_approval(call_of(call_id="adk-2"), purpose="taxi", amount=20)
    with pytest.raises(InputError):
        await ledger.request_approval(call_of(call_id="adk-3"), purpose="taxi", amount="1e2")
    assert await ledger.tickets.count() == 1


async def test_the_ledger_refuses_a_requester_who_is_not_a_plain_name(ledger):
    with pytest.raises(UnusableUserId):
        await ledger.request_approval(call_of(user="Alice"), purpose="team lunch", amount=250)
    assert await ledger.tickets.count() == 0


async def test_the_ledger_sends_what_the_daily_rules_refuse_to_an_approver_and_says_why(ledger):
    paid, already = await ledger.reimburse(call_of(call_id="adk-1"), purpose="taxi", amount=40)
    assert (paid.amount_cents, already) == (4_000, False)
    with pytest.raises(NeedsApproval):
        await ledger.reimburse(call_of(call_id="adk-2"), purpose="hotel", amount=30)

    requested = await ledger.request_approval(call_of(call_id="adk-3"), purpose="hotel", amount=30)

    assert requested.ticket.status == "pending" and "daily limit" in requested.as_response()["why"]


async def test_the_ledger_pays_above_the_threshold_only_an_approved_ticket(ledger):
    with pytest.raises(NotApproved):
        await ledger.reimburse(call_of(call_id="adk-9"), purpose="team lunch", amount=250)
    requested = await ledger.request_approval(call_of(), purpose="team lunch", amount=250)
    await ledger.tickets.decide(requested.ticket.id, approver="bob", approve=True)

    payout, already = await ledger.reimburse(call_of(call_id="adk-10"), purpose="team lunch", amount=250)

    assert (payout.ticket_id, payout.amount_cents, already) == (requested.ticket.id, 25_000, False)


async def test_split_requests_of_one_message_need_two_approvers_and_the_answer_says_why(ledger):
    first = await ledger.request_approval(call_of(call_id="adk-1"), purpose="server", amount=3000)
    second = await ledger.request_approval(call_of(call_id="adk-2"), purpose="server rack", amount=3000)

    assert (first.ticket.approvals_needed, second.ticket.approvals_needed) == (1, 2)
    assert first.ticket.id in second.as_response()["why"] and "two approvers" in second.as_response()["why"]
