"""What the guard lets through, `reimburse` can pay; a delivery that paid nothing leaves its approval payable.

Two rules (docs/security.md#the-guard, #delivery):
- an amount in an approval's FunctionResponse is read by the one amount rule `reimburse` reads amounts with
  (ledger/inputs.py): a spelling one accepts the other accepts, and one refuses the other refuses;
- an approved ticket is delivered only with its payout: a delivery run that ended without paying it is a failed
  delivery, so `deliver` can try again and `settle` pays it, once.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.conversation import Conversation, calls, event_texts, pending_request, responses
from support.desks import TestDesk
from support.models import ScriptedModel, call_part, text_part

from long_running_agent.delivery.courier import Courier
from long_running_agent.delivery.notes import NOTE_MARK, REFUSAL_PREFIX
from long_running_agent.ledger import Ledger, NotSettleable, Ticket, ToolCall
from long_running_agent.ledger.inputs import AmountError
from long_running_agent.names import Outcome


def refusal_note(events: list[Any]) -> str:
    """The agent's one note, a refusal, answered instead of a run (the model never called)."""
    [event] = events
    assert event.author == "expense_agent" and (event.custom_metadata or {}).get(NOTE_MARK), event
    [text] = event_texts(events)
    assert text.startswith(REFUSAL_PREFIX), text
    return text


async def approved_200_of_250(desk: TestDesk, url: str, model: Any = None) -> tuple[Conversation, Any, Ticket]:
    """alice asks $250 for the team lunch; bob approves $200 of it in the ledger, not delivered yet."""
    chat, call, ticket_id = await pending_request(desk, url, model)
    approved = await desk.ledger_at(url).tickets.decide(ticket_id, approver="bob", approve=True, amount=200,
                                                        reason="over the per diem")
    return chat, call, approved


async def payable(ledger: Ledger, ticket_id: str) -> Ticket:
    """The ticket, asserted unpaid and payable: deliverable, or with a failed delivery that settle accepts."""
    ticket = await ledger.tickets.get(ticket_id)
    assert await ledger.payouts.find(ticket_id=ticket_id) == []
    assert ticket.delivered_at is None and ticket.settled_at is None, ticket
    return ticket


async def test_an_amount_reimburse_would_refuse_is_refused_and_the_approval_is_delivered_and_paid_once(
        desk, sqlite_url):
    # The probe: bob approved $200 of $250; the requester sends the updated response, same id and
    # name, with the amount spelled "2e2".
    chat, call, approved = await approved_200_of_250(desk, sqlite_url)

    note = refusal_note(await chat.answer(call, approved.as_response() | {"amount": "2e2"}))

    assert "'2e2'" in note and approved.id in note
    await payable(desk.ledger, approved.id)
    delivery = await Courier(desk).deliver(approved.id, actor="bob")
    assert delivery.delivered, delivery.refusal
    [paid] = responses(delivery.events, "reimburse")
    assert (paid["status"], paid["amount"]) == ("paid", 200.0)
    again = await Courier(desk).deliver(approved.id, actor="bob")
    assert again.outcome is Outcome.ALREADY_DELIVERED
    assert [p.amount_cents for p in await desk.ledger.payouts.find(ticket_id=approved.id)] == [20_000]


# A model that is told of the approval and never calls reimburse.
NEVER_PAYS = [call_part("ask_for_approval", purpose="team lunch", amount=250.0), text_part("Waiting for an approver."),
              text_part("Approved, enjoy your lunch."), text_part("Anything else?")]


async def delivered_by_the_courier(desk: TestDesk, chat: Conversation, call: Any, ticket_id: str) -> None:
    delivery = await Courier(desk).decide(ticket_id, approver="bob", approve=True, app=chat.runner.app)
    assert delivery.outcome is Outcome.FAILED and "without paying" in delivery.detail, delivery


async def delivered_before_the_next_message(desk: TestDesk, chat: Conversation, call: Any, ticket_id: str) -> None:
    await desk.ledger.tickets.decide(ticket_id, approver="bob", approve=True)
    await chat.say("Any news?")


async def answered_in_the_chat(desk: TestDesk, chat: Conversation, call: Any, ticket_id: str) -> None:
    approved = await desk.ledger.tickets.decide(ticket_id, approver="bob", approve=True)
    await chat.answer(call, approved.as_response())


@pytest.mark.parametrize("delivered", [delivered_by_the_courier, delivered_before_the_next_message,
                                       answered_in_the_chat], ids=lambda way: way.__name__)
async def test_a_delivery_whose_model_never_pays_leaves_the_approval_settleable(desk, sqlite_url, delivered):
    model = ScriptedModel(script=list(NEVER_PAYS))
    chat, call, ticket_id = await pending_request(desk, sqlite_url, model)

    await delivered(desk, chat, call, ticket_id)

    ledger = desk.ledger
    session = await chat.runner.session_service.get_session(app_name=chat.runner.app_name, user_id="alice",
                                                            session_id=chat.session_id)
    assert calls(session.events, "reimburse") == [] and len(model.requests) >= 3  # the decision reached the model
    ticket = await payable(ledger, ticket_id)
    assert "without paying" in (ticket.delivery_error or "")
    assert [e.action for e in await ledger.tickets.audit(ticket_id)][-1] == "undelivered"
    settled, payout = await ledger.deliveries.settle(ticket_id, approver="carol")
    assert payout is not None and payout.amount_cents == 25_000 and settled.settled_at is not None
    with pytest.raises(NotSettleable):
        await ledger.deliveries.settle(ticket_id, approver="carol")
    assert len(await ledger.payouts.find(ticket_id=ticket_id)) == 1


# bob approved $200: each spelling of an amount, and whether the amount rule reads it as $200 (True) or refuses it.
SPELLINGS = [
    (200, True), (200.0, True), ("200", True), ("200.00", True), ("$200", True), ("$200.00", True),
    (" 200.00 ", True),
    ("2e2", False), ("2E2", False), ("0.2e3", False), ("200e0", False), ("2_00", False), ("+200", False),
    ("２００", False), ("٢٠٠", False), ("200 USD", False), (True, False), ("Infinity", False),
]


@pytest.mark.parametrize("amount, read", SPELLINGS, ids=repr)
async def test_the_guard_and_reimburse_accept_and_refuse_the_same_amounts(desk, sqlite_url, amount, read):
    chat, call, approved = await approved_200_of_250(desk, sqlite_url)

    events = await chat.answer(call, approved.as_response() | {"amount": amount})

    ledger = desk.ledger
    if read:
        # Let through as sent: the model passes the amount it was shown on, and reimburse pays it.
        assert [r["status"] for r in responses(events, "reimburse")] == ["paid"]
    else:
        assert repr(amount) in refusal_note(events)
        await payable(desk.ledger, approved.id)
    # reimburse itself, called with the same spelling in the same conversation: the same verdict.
    direct = ledger.reimburse(ToolCall(approved.conversation, call_id="direct"), purpose="team lunch", amount=amount)
    if read:
        payout, already_paid = await direct
        assert already_paid and payout.amount_cents == 20_000
    else:
        with pytest.raises(AmountError):
            await direct
    assert len(await ledger.payouts.find(ticket_id=approved.id)) == int(read)

