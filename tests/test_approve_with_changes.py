"""Approve with changes: an approver approves less than was asked, with a reason; that, and no more, is paid.

The ledger holds both amounts; `reimburse` pays the approved one whatever the
model asks; the model is told what was approved and why; the audit trail
shows both. Every surface (ledger, CLI, API, inbox page) refuses an amount
above the request, zero or below, or malformed, saying what to send.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from support import cli
from support.conversation import event_texts, pending_request, request_large, responses
from support.models import ScriptedModel, call_part, text_part

from long_running_agent.delivery.courier import Courier
from long_running_agent.ledger import AlreadyDecided, Ledger
from long_running_agent.ledger.inputs import InputError


async def test_the_approved_amount_is_paid_and_the_requester_is_told_why(desk, db_url):
    _runner, _chat, _events, _call, pending = await request_large(desk, db_url)
    ledger = desk.ledger

    delivery = await Courier(desk).decide(pending["ticket_id"], approver="bob", approve=True,
                                        amount="200", reason="over the per diem")

    [paid] = responses(delivery.events, "reimburse")
    assert (paid["status"], paid["amount"]) == ("paid", 200.0)
    [payout] = await ledger.payouts.find(ticket_id=pending["ticket_id"])
    assert payout.amount_cents == 20_000
    told = event_texts(delivery.events)[-1]
    assert "$200.00 for team lunch was paid" in told and "of the $250.00 you asked: over the per diem" in told
    ticket = await ledger.tickets.get(pending["ticket_id"])
    assert (ticket.amount_cents, ticket.approved_cents, ticket.reason) == (25_000, 20_000, "over the per diem")
    [approved] = [e for e in await ledger.tickets.audit(ticket.id) if e.action == "approved"]
    assert approved.detail == "$200.00 of the $250.00 asked: over the per diem"


@pytest.mark.parametrize("asked_for", [250.0, 200.0])
async def test_reimburse_pays_the_approved_amount_whatever_the_model_asks(desk, sqlite_url, asked_for):
    model = ScriptedModel(script=[
        call_part("ask_for_approval", purpose="team lunch", amount=250.0), text_part("Waiting."),
        call_part("reimburse", purpose="team lunch", amount=asked_for), text_part("Paid."),
    ])
    chat, _call, ticket_id = await pending_request(desk, sqlite_url, model)
    delivery = await Courier(desk).decide(ticket_id, approver="bob", approve=True, amount=200, reason="cap",
                                        app=chat.runner.app)

    [paid] = responses(delivery.events, "reimburse")
    assert (paid["status"], paid["amount"]) == ("paid", 200.0)
    assert [p.amount_cents for p in await desk.ledger.payouts.find(ticket_id=ticket_id)] == [20_000]


async def test_a_model_asking_more_than_was_asked_or_approved_is_refused(desk, sqlite_url):
    model = ScriptedModel(script=[
        call_part("ask_for_approval", purpose="team lunch", amount=250.0), text_part("Waiting."),
        call_part("reimburse", purpose="team lunch", amount=9_999.0), text_part("Could not pay."),
    ])
    chat, _call, ticket_id = await pending_request(desk, sqlite_url, model)
    delivery = await Courier(desk).decide(ticket_id, approver="bob", approve=True, amount=200, reason="cap",
                                        app=chat.runner.app)

    [refused] = responses(delivery.events, "reimburse")
    assert refused["status"] == "error" and "No approved ticket for $9,999.00" in refused["error"]
    assert await desk.ledger.payouts.find(ticket_id=ticket_id) == []


@pytest.mark.parametrize("amount, message", [
    (300, "$300.00 is more than the $250.00 asked"),
    ("250.01", "$250.01 is more than the $250.00 asked"),
    (0, "must be more than zero"),
    (-5, "must be more than zero"),
    ("abc", "is not a number of dollars and cents"),
    ("1e2", "is not a number of dollars and cents"),
    (True, "must be a number of dollars"),
    ({"value": 200}, "must be a number of dollars"),
    (199.999, "fractions of a cent"),
    (float("nan"), "finite"),
])
async def test_a_bad_amount_is_refused_and_decides_nothing(desk, sqlite_url, amount, message):
    ledger = desk.ledger
    ticket = await ledger.tickets.open(app_name="a", user_id="alice", session_id="s", call_id="c",
                                      call_name="ask_for_approval", purpose="team lunch", amount_cents=25_000,
                                      ttl=timedelta(hours=1))
    with pytest.raises(InputError, match="amount") as refusal:
        await ledger.tickets.decide(ticket.id, approver="bob", approve=True, amount=amount, reason="cap")
    assert message in str(refusal.value)
    assert (await ledger.tickets.get(ticket.id)).status == "pending"


async def test_less_than_asked_needs_a_reason_and_a_rejection_takes_no_amount(desk, sqlite_url):
    _chat, _call, ticket_id = await pending_request(desk, sqlite_url)
    ledger = desk.ledger
    with pytest.raises(InputError, match="Approving less than was asked needs a reason"):
        await ledger.tickets.decide(ticket_id, approver="bob", approve=True, amount=200)
    with pytest.raises(InputError, match="a rejection pays nothing"):
        await ledger.tickets.decide(ticket_id, approver="bob", approve=False, amount=200, reason="no")
    # The amount asked is a plain approval: no reason needed, nothing changed.
    ticket = await ledger.tickets.decide(ticket_id, approver="bob", approve=True, amount="250.00")
    assert ticket.approved_cents is None and not ticket.changed


async def test_two_approvers_changing_the_amount_at_once_end_with_one_decision(desk, db_url):
    _chat, _call, ticket_id = await pending_request(desk, db_url)
    ledgers = [Ledger(db_url) for _ in range(2)]  # two connections, as two servers have
    try:
        results = await asyncio.gather(
            ledgers[0].tickets.decide(ticket_id, approver="bob", approve=True, amount=200, reason="bob's cap"),
            ledgers[1].tickets.decide(ticket_id, approver="carol", approve=True, amount=150, reason="carol's cap"),
            return_exceptions=True,
        )
    finally:
        for ledger in ledgers:
            await ledger.close()
    [won] = [r for r in results if not isinstance(r, BaseException)]
    [lost] = [r for r in results if isinstance(r, BaseException)]
    assert isinstance(lost, AlreadyDecided)
    stored = await desk.ledger.tickets.get(ticket_id)
    assert (stored.decided_by, stored.approved_cents) == (won.decided_by, won.approved_cents)
    assert [e.action for e in await desk.ledger.tickets.audit(ticket_id)].count("approved") == 1


def test_the_cli_approves_less_with_a_reason_and_says_so(sqlite_url):
    ticket_id = cli.request_ticket(sqlite_url)  # $250 for the team lunch

    missing = cli.expenses("approve", ticket_id, "--approver", "bob", "--amount", "200", url=sqlite_url)
    above = cli.expenses("approve", ticket_id, "--approver", "bob", "--amount", "$260", "--reason", "x", url=sqlite_url)
    approved = cli.expenses("approve", ticket_id, "--approver", "bob", "--amount", "200", "--reason", "per diem",
                   url=sqlite_url)

    assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1
    assert missing.stderr.startswith("error: Approving less than was asked needs a reason; the requester is told it.")
    assert above.returncode == 1 and "$260.00 is more than the $250.00 asked" in above.stderr
    assert approved.returncode == 0, approved.stderr
    assert f"Ticket {ticket_id} is approved by bob for $200.00 of the $250.00 asked" in approved.stdout
    assert "of the $250.00 you asked: per diem" in approved.stdout
    shown = cli.expenses("show", ticket_id, url=sqlite_url).stdout
    assert '"approved_amount": 200.0' in shown and "Paid: P-" in shown and "$200.00 at" in shown


async def test_a_pending_call_answered_by_a_lower_approval_keeps_its_id_and_name(desk, sqlite_url):
    runner, chat, _events, pending_call, pending = await request_large(desk, sqlite_url)
    await Courier(desk).decide(pending["ticket_id"], approver="bob", approve=True, amount=99.5,
                             reason="only the food")

    session = await runner.session_service.get_session(app_name=runner.app_name, user_id="alice",
                                                       session_id=chat.session_id)
    [decision] = [r for e in session.events if e.author == "user" for r in e.get_function_responses()]
    assert (decision.id, decision.name) == (pending_call.id, "ask_for_approval")
    assert decision.response == {"status": "approved", "ticket_id": pending["ticket_id"], "by": "bob",
                                 "amount": 99.5, "asked": 250.0, "reason": "only the food"}
