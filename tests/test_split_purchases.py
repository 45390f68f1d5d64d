"""Split purchases: small payouts without approval are capped per requester and UTC day.

A payout within APPROVAL_THRESHOLD is paid at once only while the requester's
total paid without approval that day stays within DAILY_AUTO_APPROVAL_LIMIT
($250 by default), and only once per purpose; anything else goes to an approver.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from support.conversation import Conversation, calls, event_texts, pending_calls, responses
from support.models import ScriptedModel, call_part, make_runner, runner_with, text_part
from support.processes import ROOT

from long_running_agent.delivery.courier import Courier, Outcome
from long_running_agent.ledger import DAILY_LIMIT, SAME_PURPOSE, Ledger, NeedsApproval, TicketStatus
from long_running_agent.ledger import Conversation as ConversationKey
from long_running_agent.ledger.policy.rules import purpose_key

LIMIT_CENTS = 25_000
DOCS_SECTION = (ROOT / "docs" / "security.md").read_text().split("## Split purchases\n")[1].split("\n## ")[0]


async def unticketed_total(ledger: Ledger) -> int:
    return sum(p.amount_cents for p in await ledger.payouts.find() if p.ticket_id is None)


async def test_ten_laptops_in_one_conversation_pay_once_and_open_nine_tickets(desk, db_url):
    chat = await Conversation(make_runner(desk, db_url)).start()
    ledger = desk.ledger

    replies = [await chat.say("Reimburse $100 for the same laptop") for _ in range(10)]

    assert [r["status"] for events in replies for r in responses(events, "reimburse")] == (
        ["paid"] + ["needs_approval"] * 9
    )
    assert {r["reason"] for events in replies[1:] for r in responses(events, "reimburse")} == {SAME_PURPOSE}
    assert await unticketed_total(ledger) == 10_000
    tickets = await ledger.tickets.with_status(TicketStatus.PENDING)
    assert len(tickets) == 9
    assert {(t.purpose, t.amount_cents, t.user_id) for t in tickets} == {("same laptop", 10_000, "alice")}
    assert [len(pending_calls(events)) for events in replies] == [0] + [1] * 9


async def test_small_expenses_are_paid_at_once_only_up_to_the_daily_limit(desk, db_url):
    chat = await Conversation(make_runner(desk, db_url)).start()
    ledger = desk.ledger
    items = ["laptop", "monitor", "keyboard", "mouse", "dock", "headset", "webcam", "charger", "cable"]

    statuses = []
    for item in items:
        [result] = responses(await chat.say(f"Reimburse $100 for a {item}"), "reimburse")
        statuses.append(result["status"])
    [last] = responses(await chat.say("Reimburse $50 for a laptop stand"), "reimburse")

    assert statuses == ["paid", "paid"] + ["needs_approval"] * 7
    assert last["status"] == "paid"  # $200 + $50 is exactly the limit
    assert await unticketed_total(ledger) == LIMIT_CENTS
    assert await ledger.payouts.paid_without_approval("alice") == LIMIT_CENTS
    assert await ledger.tickets.count(TicketStatus.PENDING) == 7


async def test_the_requester_is_told_why_and_a_ticket_is_opened(desk, db_url):
    chat = await Conversation(make_runner(desk, db_url)).start()
    for item in ("monitor", "keyboard"):
        await chat.say(f"Reimburse $100 for a {item}")

    events = await chat.say("Reimburse $100 for a laptop")

    [refusal] = responses(events, "reimburse")
    assert refusal["status"] == "needs_approval" and refusal["reason"] == DAILY_LIMIT
    assert "reimbursed $200.00 today (UTC)" in refusal["message"] and "limit for that is $250.00" in refusal["message"]
    [asked] = pending_calls(events)
    assert (asked.name, asked.args) == ("ask_for_approval", {"purpose": "laptop", "amount": 100.0})
    [pending] = responses(events, "ask_for_approval")
    ticket = await desk.ledger.tickets.get(pending["ticket_id"])
    assert (ticket.status, ticket.amount_cents, ticket.call_id) == (TicketStatus.PENDING, 10_000, asked.id)
    reply = event_texts(events)[-1]
    assert "reimbursed $200.00 today" in reply and "$250.00" in reply and ticket.id in reply
    [requested] = await desk.ledger.tickets.audit(ticket.id)
    assert "needs approval" in requested.detail
    # The docs show this very exchange.
    assert refusal["message"] in DOCS_SECTION
    assert f"agent    | {reply.replace(ticket.id, 'T-…')}\n" in DOCS_SECTION


async def test_a_near_duplicate_purpose_needs_an_approver(desk, db_url):
    model = ScriptedModel(script=[
        call_part("reimburse", purpose="Taxi to the airport", amount=40.0), text_part("ok"),
        call_part("reimburse", purpose="the  TAXI to the airport.", amount=30.0), text_part("ok"),
        call_part("reimburse", purpose="taxi home", amount=30.0), text_part("ok"),
    ])
    chat = await Conversation(runner_with(desk, model, db_url)).start()

    first, again, other = [responses(await chat.say(f"expense {n}"), "reimburse")[0] for n in range(3)]

    assert first["status"] == "paid" and other["status"] == "paid"
    assert again["status"] == "needs_approval" and again["reason"] == SAME_PURPOSE
    assert "already reimbursed $40.00 for Taxi to the airport today" in again["message"]
    assert await unticketed_total(desk.ledger) == 7_000


@pytest.mark.parametrize("left, right", [
    ("The  Laptop", "laptop"), ("my laptop.", "a laptop"), ("an Old  Monitor!", "old monitor"),
])
def test_purposes_that_differ_in_case_spacing_or_articles_are_one(left, right):
    assert purpose_key(left) == purpose_key(right)


@pytest.mark.parametrize("left, right", [("laptop", "laptop bag"), ("A4 paper", "paper"), ("theatre", "atre")])
def test_different_purposes_stay_different(left, right):
    assert purpose_key(left) != purpose_key(right)


async def test_concurrent_small_payouts_cannot_both_fit_under_the_limit(desk, db_url):
    # One ledger (one engine, one pool) per payout, as separate processes would have.
    ledgers = [Ledger(db_url) for _ in range(8)]
    try:
        for ledger in ledgers:
            await (await ledger.database.session()).close()  # create the schema once, before the race

        async def pay(ledger: Ledger, n: int, purpose: str, cents: int) -> str:
            try:
                await ledger.payouts.pay_small(
                    conversation=ConversationKey("long_running_agent", "alice", f"session-{n}"),
                    call_id=f"call-{n}", purpose=purpose, amount_cents=cents, requester="alice",
                    purpose_key=purpose_key(purpose), daily_limit_cents=LIMIT_CENTS,
                )
                return "paid"
            except NeedsApproval as refusal:
                return refusal.reason

        different = await asyncio.gather(
            *(pay(ledger, n, f"item {n}", 10_000) for n, ledger in enumerate(ledgers))
        )
        same = await asyncio.gather(
            *(pay(ledger, n + 10, "one laptop", 1_000) for n, ledger in enumerate(ledgers))
        )
    finally:
        for ledger in ledgers:
            await ledger.close()

    assert sorted(different) == [DAILY_LIMIT] * 6 + ["paid"] * 2
    assert sorted(same) == ["paid"] + [SAME_PURPOSE] * 7
    ledger = desk.ledger
    assert await ledger.payouts.paid_without_approval("alice") == await unticketed_total(ledger) == 21_000


async def test_an_approved_small_ticket_pays_exactly_once(desk, db_url):
    chat = await Conversation(make_runner(desk, db_url)).start()
    ledger = desk.ledger
    await chat.say("Reimburse $100 for the same laptop")
    events = await chat.say("Reimburse $100 for the same laptop")
    [asked] = pending_calls(events)
    ticket_id = responses(events, "ask_for_approval")[0]["ticket_id"]

    delivery = await Courier(desk).decide(ticket_id, approver="bob", approve=True)

    assert delivery.outcome is Outcome.DELIVERED
    [paid] = responses(delivery.events, "reimburse")
    assert paid["status"] == "paid" and paid["ticket_id"] == ticket_id
    # The same decision sent again is refused, and pays nothing more.
    again = await chat.answer(asked, (await ledger.tickets.get(ticket_id)).as_response())
    assert calls(again, "reimburse") == []
    # A new request for the same thing does not reuse the paid ticket.
    with pytest.raises(NeedsApproval):
        await ledger.payouts.pay_small(
            conversation=ConversationKey("long_running_agent", "alice", chat.session_id), call_id="new",
            purpose="same laptop", amount_cents=10_000, requester="alice",
            purpose_key="same laptop", daily_limit_cents=LIMIT_CENTS,
        )
    [payout] = await ledger.payouts.find(ticket_id=ticket_id)
    assert payout.amount_cents == 10_000
    # A payout an approver approved does not count against the allowance.
    assert await ledger.payouts.paid_without_approval("alice") == 10_000


async def test_the_allowance_starts_again_on_the_next_utc_day(sqlite_url):
    now = [datetime(2026, 3, 3, 23, 59, tzinfo=UTC)]
    ledger = Ledger(sqlite_url, clock=lambda: now[0])
    key = ConversationKey("long_running_agent", "alice", "s")

    async def pay(n: int, purpose: str, cents: int) -> None:
        await ledger.payouts.pay_small(
            conversation=key, call_id=f"c{n}", purpose=purpose, amount_cents=cents, requester="alice",
            purpose_key=purpose_key(purpose), daily_limit_cents=LIMIT_CENTS,
        )

    try:
        await pay(1, "laptop", 10_000)
        await pay(2, "monitor", 15_000)
        with pytest.raises(NeedsApproval):
            await pay(3, "mouse", 1_000)
        now[0] = datetime(2026, 3, 4, 0, 1, tzinfo=UTC)
        await pay(4, "laptop", 10_000)  # a new day: the same purpose and a new allowance
        assert await ledger.payouts.paid_without_approval("alice") == 10_000
    finally:
        await ledger.close()


async def test_a_limit_of_zero_sends_every_small_payout_to_an_approver(desk, sqlite_url, configure):
    configure(daily_auto_approval_limit=Decimal("0"))
    chat = await Conversation(make_runner(desk, sqlite_url)).start()

    events = await chat.say("Reimburse $20 for a coffee")

    assert responses(events, "reimburse")[0]["reason"] == DAILY_LIMIT
    assert pending_calls(events) and await desk.ledger.payouts.find() == []
    assert "without approval is $0.00" in event_texts(events)[-1]


async def test_approval_is_still_refused_for_a_small_amount_the_rules_allow(desk, sqlite_url):
    model = ScriptedModel(script=[call_part("ask_for_approval", purpose="coffee", amount=20.0), text_part("ok")])
    chat = await Conversation(runner_with(desk, model, sqlite_url)).start()

    events = await chat.say("Reimburse $20 for a coffee")

    [refused] = responses(events, "ask_for_approval")
    assert refused["status"] == "error" and "call reimburse directly" in refused["error"].lower()
    assert await desk.ledger.tickets.count(TicketStatus.PENDING) == 0
