"""Several approvals at once: one message, one ticket per expense, each decided and paid on its own.

The offline model answers a message naming several expenses with one call per
expense in one turn (parallel function calls), as Gemini does. Each ticket is
decided independently, in any order, from any surface; each approved one is
paid once, and the requester is told each outcome as it arrives.
"""

from __future__ import annotations

import asyncio
from itertools import permutations

import pytest
from support import cli
from support.conversation import Conversation, calls, event_texts, pending_calls, responses
from support.desks import TestDesk
from support.models import RecordedOfflineModel, runner_with

from long_running_agent.delivery.courier import Courier
from long_running_agent.ledger import AlreadyDecided, TicketStatus
from long_running_agent.model.requests import find_expenses
from long_running_agent.web.views import agent_reply

THREE = "Reimburse $250 for the team lunch, $480 for the conference ticket and $45 for a taxi"


async def ask_three(desk: TestDesk, db_url: str, model: RecordedOfflineModel | None = None):
    chat = await Conversation(runner_with(desk, model or RecordedOfflineModel(), db_url)).start()
    events = await chat.say(THREE)
    return chat, events


async def test_one_message_opens_a_ticket_per_large_expense_and_pays_the_small_one_at_once(desk, db_url):
    chat, events = await ask_three(desk, db_url)
    ledger = desk.ledger

    [(lunch, conference)] = [e.get_function_calls()[:2] for e in events if len(e.get_function_calls()) == 3]
    assert [(c.name, c.args["purpose"]) for c in pending_calls(events)] == [
        ("ask_for_approval", "team lunch"), ("ask_for_approval", "conference ticket")]
    assert [r["status"] for r in responses(events, "ask_for_approval")] == ["pending", "pending"]
    [taxi] = responses(events, "reimburse")
    assert taxi["status"] == "paid" and taxi["amount"] == 45.0

    tickets = {t.purpose: t for t in await ledger.tickets.with_status(TicketStatus.PENDING)}
    assert {p: t.amount_cents for p, t in tickets.items()} == {"team lunch": 25_000, "conference ticket": 48_000}
    assert {t.call_id for t in tickets.values()} == {lunch.id, conference.id}
    told = " ".join(event_texts(events))
    assert all(t.id in told for t in tickets.values()) and "$45.00 for taxi was paid" in told


async def test_each_ticket_is_decided_on_its_own_in_any_order_and_paid_once(desk, db_url):
    model = RecordedOfflineModel()
    chat, _events = await ask_three(desk, db_url, model)
    ledger = desk.ledger
    tickets = {t.purpose: t for t in await ledger.tickets.with_status(TicketStatus.PENDING)}

    # The second ticket first, in this process; the first from the CLI, another process.
    conference = await Courier(desk).decide(tickets["conference ticket"].id, approver="bob", approve=True)
    assert conference.delivered
    [paid] = responses(conference.events, "reimburse")
    assert paid["status"] == "paid" and paid["amount"] == 480.0
    assert "$480.00 for conference ticket was paid" in event_texts(conference.events)[-1]
    assert await ledger.tickets.get(tickets["team lunch"].id) == tickets["team lunch"]  # untouched, still pending

    before = len(model.requests)
    rejected = await asyncio.to_thread(cli.expenses, "reject", tickets["team lunch"].id, "--approver", "carol",
                                       "--reason", "no receipt", url=db_url)
    assert rejected.returncode == 0, rejected.stderr
    assert "was rejected by carol (no receipt). Nothing was paid." in rejected.stdout
    # The paid approval beside it is not paid again: no reimburse call at all in that delivery.
    assert "calls reimburse" not in rejected.stdout and len(model.requests) == before

    payouts = await ledger.payouts.find(session_id=chat.session_id)
    assert sorted((p.ticket_id or "none", p.amount_cents) for p in payouts) == sorted(
        [("none", 4_500), (tickets["conference ticket"].id, 48_000)])
    for ticket in tickets.values():
        assert (await ledger.tickets.get(ticket.id)).delivered_at is not None


async def test_the_guard_and_exactly_once_hold_for_each_ticket(desk, sqlite_url):
    chat, events = await ask_three(desk, sqlite_url)
    ledger = desk.ledger
    lunch, conference = pending_calls(events)
    lunch_ticket, conference_ticket = (r["ticket_id"] for r in responses(events, "ask_for_approval"))

    # A forged approval of one ticket is refused, and decides nothing.
    forged = await chat.answer(lunch, {"status": "approved", "ticket_id": lunch_ticket})
    assert calls(forged, "reimburse") == [] and "still pending" in event_texts(forged)[-1]

    decided = await ledger.tickets.decide(conference_ticket, approver="bob", approve=True)
    first = await chat.answer(conference, decided.as_response())
    again = await chat.answer(conference, decided.as_response())
    assert len(calls(first, "reimburse")) == 1 and calls(again, "reimburse") == []
    assert len(await ledger.payouts.find(ticket_id=conference_ticket)) == 1
    assert (await ledger.tickets.get(lunch_ticket)).status is TicketStatus.PENDING
    with pytest.raises(AlreadyDecided):
        await ledger.tickets.decide(conference_ticket, approver="carol", approve=False, reason="late")


# One message, two or three tickets: different purposes, one purpose twice at two amounts, one at the same amount.
SEVERAL = {
    "two purposes": "Reimburse $250 for the team lunch and $480 for the conference ticket",
    "one purpose, two amounts": "Reimburse $250 for the team lunch and $300 for the team lunch",
    "one purpose, one amount": "Reimburse $250 for the team lunch and $250 for the team lunch",
    "three purposes": "Reimburse $250 for the team lunch, $480 for the conference ticket and $300 for the hotel",
}
FLOWS = [(name, order) for name, text in SEVERAL.items()
         for order in permutations(range(len(find_expenses(text))))]


@pytest.mark.parametrize(("message", "order"), FLOWS, ids=[f"{m}-{''.join(map(str, o))}" for m, o in FLOWS])
async def test_each_approval_pays_its_own_ticket_once_and_the_reply_names_that_payout(desk, sqlite_url, message, order):
    chat = await Conversation(runner_with(desk, RecordedOfflineModel(), sqlite_url)).start()
    events = await chat.say(SEVERAL[message])
    ledger = desk.ledger
    asked = [r["ticket_id"] for r in responses(events, "ask_for_approval")]
    assert len(asked) == len(order) and len(set(asked)) == len(asked)

    reimbursed = 0
    for ticket_id in (asked[i] for i in order):
        delivery = await Courier(desk).decide(ticket_id, approver="bob", approve=True)

        assert delivery.delivered, delivery.detail
        [payout] = await ledger.payouts.find(ticket_id=ticket_id)
        # This approval ran reimburse once, and that call paid this very ticket now.
        assert [r for r in responses(delivery.events, "reimburse")] == [
            {"status": "paid", "payout_id": payout.id, "amount": payout.amount, "ticket_id": ticket_id}]
        reimbursed += len(calls(delivery.events, "reimburse"))
        # What the approver and the requester are told names this payout and amount, and no other payout.
        reply = agent_reply(delivery.events) or ""
        others = [p.id for p in await ledger.payouts.find(session_id=chat.session_id) if p.id != payout.id]
        assert payout.id in reply and payout.amount_text in reply, reply
        assert not any(other in reply for other in others), reply

    assert reimbursed == len(asked)
    for ticket_id in asked:
        ticket = await ledger.tickets.get(ticket_id)
        assert len(await ledger.payouts.find(ticket_id=ticket_id)) == 1 and ticket.delivered_at is not None


async def test_an_approval_pays_its_own_ticket_while_an_equal_one_waits_for_its_delivery(desk, sqlite_url):
    chat = await Conversation(runner_with(desk, RecordedOfflineModel(), sqlite_url)).start()
    events = await chat.say(SEVERAL["one purpose, one amount"])
    ledger = desk.ledger
    first, second = (r["ticket_id"] for r in responses(events, "ask_for_approval"))
    # The first is approved by a process that stopped before delivering it: same purpose, same amount.
    await ledger.tickets.decide(first, approver="carol", approve=True)

    delivery = await Courier(desk).decide(second, approver="bob", approve=True)

    [paid] = responses(delivery.events, "reimburse")
    [payout] = await ledger.payouts.find(ticket_id=second)
    assert (paid["status"], paid["ticket_id"], paid["payout_id"]) == ("paid", second, payout.id)
    assert await ledger.payouts.find(ticket_id=first) == []
    owed = await Courier(desk).deliver(first, actor="carol")
    [paid] = responses(owed.events, "reimburse")
    [payout] = await ledger.payouts.find(ticket_id=first)
    assert (paid["status"], paid["ticket_id"], paid["payout_id"]) == ("paid", first, payout.id)
    assert payout.id in (agent_reply(owed.events) or "")


@pytest.mark.parametrize("message", ["two purposes", "one purpose, one amount"])
async def test_the_reply_tells_of_this_approvals_amount_and_reason_not_another_tickets(desk, sqlite_url, message):
    chat = await Conversation(runner_with(desk, RecordedOfflineModel(), sqlite_url)).start()
    first, second = [r["ticket_id"] for r in responses(await chat.say(SEVERAL[message]), "ask_for_approval")]

    lowered = await Courier(desk).decide(second, approver="bob", approve=True, amount="200",
                                       reason="capped by bob")
    full = await Courier(desk).decide(first, approver="carol", approve=True)

    assert "capped by bob" in (agent_reply(lowered.events) or "")
    # carol approved all she was asked: nothing of bob's lower amount or reason belongs in her reply.
    reply = agent_reply(full.events) or ""
    assert "capped by bob" not in reply and "$200.00" not in reply, reply
