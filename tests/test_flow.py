"""The long-running approval flow end to end, on SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from support.conversation import Conversation, calls, event_texts, pending_calls, request_large, responses
from support.models import RecordedOfflineModel, make_runner

from long_running_agent.delivery.courier import Courier, Outcome
from long_running_agent.delivery.notes import REFUSAL_PREFIX
from long_running_agent.ledger import TicketExpired, TicketStatus


async def test_large_amount_waits_for_approval_then_pays_once(desk, db_url):
    model = RecordedOfflineModel()
    runner, chat, events, call, pending = await request_large(desk, db_url, model)
    ledger = desk.ledger

    assert call.name == "ask_for_approval"
    assert call.args == {"purpose": "team lunch", "amount": 250.0}
    assert pending["status"] == "pending" and pending["ticket_id"].startswith("T-")
    assert calls(events, "reimburse") == []
    assert pending["ticket_id"] in event_texts(events)[-1]
    assert await ledger.payouts.find(session_id=chat.session_id) == []

    decision = await ledger.tickets.decide(pending["ticket_id"], approver="bob", approve=True)
    calls_before = len(model.requests)
    resumed = await chat.answer(call, decision.as_response())

    [reimburse] = calls(resumed, "reimburse")
    assert reimburse.args == {"purpose": "team lunch", "amount": 250.0}
    [paid] = responses(resumed, "reimburse")
    assert paid["status"] == "paid" and paid["ticket_id"] == pending["ticket_id"]
    [payout] = await ledger.payouts.find(session_id=chat.session_id)
    assert (payout.ticket_id, payout.amount_cents) == (pending["ticket_id"], 25000)
    # Request -> call + acknowledgement; resume -> reimburse + confirmation.
    assert calls_before == 2 and len(model.requests) == 4
    # Gemini's rule: the model sees the resumed response right after its call.
    history = model.requests[2].contents
    assert history[-2].parts[0].function_call.name == call.name
    assert history[-1].parts[0].function_response.name == call.name
    assert history[-1].parts[0].function_response.response["status"] == "approved"


async def test_duplicate_approval_pays_once_and_calls_no_model(desk, db_url):
    model = RecordedOfflineModel()
    runner, chat, _events, call, pending = await request_large(desk, db_url, model)
    ledger = desk.ledger
    decision = await ledger.tickets.decide(pending["ticket_id"], approver="bob", approve=True)
    await chat.answer(call, decision.as_response())
    calls_after_first = len(model.requests)

    again = await chat.answer(call, decision.as_response())

    assert len(model.requests) == calls_after_first
    assert calls(again, "reimburse") == []
    assert len(await ledger.payouts.find(ticket_id=pending["ticket_id"])) == 1
    assert event_texts(again)[0].startswith(REFUSAL_PREFIX)
    assert [e.action for e in await ledger.tickets.audit(pending["ticket_id"])].count("delivered") == 1


async def test_rejection_explains_and_pays_nothing(desk, db_url):
    runner, chat, _events, call, pending = await request_large(desk, db_url)
    ledger = desk.ledger
    decision = await ledger.tickets.decide(pending["ticket_id"], approver="bob", approve=False, reason="no receipt")

    resumed = await chat.answer(call, decision.as_response())

    assert calls(resumed, "reimburse") == []
    assert "rejected" in event_texts(resumed)[-1] and "no receipt" in event_texts(resumed)[-1]
    assert await ledger.payouts.find(session_id=chat.session_id) == []


async def test_small_amount_is_paid_without_approval(desk, db_url):
    chat = await Conversation(make_runner(desk, db_url)).start()

    events = await chat.say("Reimburse $42.50 for a taxi to the airport")

    assert pending_calls(events) == []
    [paid] = responses(events, "reimburse")
    assert paid["status"] == "paid" and paid["amount"] == 42.5 and "ticket_id" not in paid
    assert len(await desk.ledger.payouts.find(session_id=chat.session_id)) == 1


async def test_approval_from_a_new_runner_resumes_the_stored_call(desk, db_url):
    _runner, chat, _events, call, pending = await request_large(desk, db_url)

    delivery = await Courier(desk).decide(pending["ticket_id"], approver="bob", approve=True
    )

    ticket = delivery.ticket
    assert delivery.outcome is Outcome.DELIVERED
    assert (ticket.call_id, ticket.call_name) == (call.id, call.name)
    assert responses(delivery.events, "reimburse")[0]["status"] == "paid"
    assert len(await desk.ledger.payouts.find(ticket_id=ticket.id)) == 1


async def test_expired_ticket_cannot_be_approved_and_the_agent_is_told(desk, db_url, clock):
    runner, chat, _events, _call, pending = await request_large(desk, db_url)
    clock.advance(hours=72, seconds=1)  # APPROVAL_TTL_HOURS is 72
    ledger = desk.ledger

    with pytest.raises(TicketExpired):
        await Courier(desk).decide(pending["ticket_id"], approver="bob", approve=True)

    assert (await ledger.tickets.get(pending["ticket_id"])).status == TicketStatus.EXPIRED
    session = await runner.session_service.get_session(
        app_name=runner.app_name, user_id="alice", session_id=chat.session_id
    )
    assert "expired" in event_texts(session.events)[-1]
    assert await ledger.payouts.find(session_id=chat.session_id) == []


async def test_ticket_ids_are_unique_and_timestamps_are_wall_clock(desk, sqlite_url):
    import datetime

    ids = set()
    for _ in range(3):
        _runner, _chat, _events, _call, pending = await request_large(desk, sqlite_url)
        ids.add(pending["ticket_id"])
        created = (await desk.ledger.tickets.get(pending["ticket_id"])).created_at
        now = datetime.datetime.now(datetime.UTC)
        assert abs(now - created) < timedelta(minutes=1)
    assert len(ids) == 3
