"""A decision whose conversation is gone, replaced or unreadable: every failed attempt is recorded, and settled.

Whatever stops a delivery - the conversation deleted, deleted and started
again empty under the same id, a session store that cannot be read - the
ledger records when and why, so the inbox and `python main.py show` say it
and an approver can settle the ticket: an approved one is paid once,
without the conversation.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from support.conversation import pending_request
from support.tickets import APP

from long_running_agent.delivery.courier import Courier, Outcome
from long_running_agent.ledger import TicketStatus


def failures(audit) -> list:
    return [entry for entry in audit if entry.action == "undelivered"]


async def test_a_conversation_started_again_under_the_same_id_is_recorded_missing_and_settled(desk, db_url):
    chat, _call, ticket_id = await pending_request(desk, db_url)
    ledger, store = desk.ledger, chat.runner.session_service
    # What an outsider does to a conversation under plain `adk api_server`: delete it, then create an
    # empty one with the same session id. It exists, but holds no call for the decision to answer.
    await store.delete_session(app_name=chat.runner.app_name, user_id="alice", session_id=chat.session_id)
    await store.create_session(app_name=chat.runner.app_name, user_id="alice", session_id=chat.session_id)

    approved = await Courier(desk).decide(ticket_id, approver="bob", approve=True)
    again = await Courier(desk).deliver(ticket_id, actor="carol")

    assert (approved.outcome, again.outcome) == (Outcome.CONVERSATION_MISSING, Outcome.CONVERSATION_MISSING)
    assert ticket_id in approved.detail or approved.ticket.call_id in approved.detail
    ticket = await ledger.tickets.get(ticket_id)
    assert ticket.status is TicketStatus.APPROVED and ticket.delivery_error and ticket.delivered_at is None
    recorded = failures(await ledger.tickets.audit(ticket_id))
    assert [entry.actor for entry in recorded] == ["bob", "carol"]
    assert (await ledger.deliveries.failures([ticket_id]))[ticket_id] == recorded[-1].at
    # Nothing was written to the new conversation, and nothing was paid.
    session = await store.get_session(app_name=chat.runner.app_name, user_id="alice", session_id=chat.session_id)
    assert session is not None and session.events == []
    assert await ledger.payouts.find(ticket_id=ticket_id) == []

    settled, payout = await ledger.deliveries.settle(ticket_id, approver="carol")

    assert settled.settled_by == "carol" and payout is not None
    assert [(p.id, p.amount_cents) for p in await ledger.payouts.find(ticket_id=ticket_id)] == [(payout.id, 25_000)]


@pytest.mark.parametrize("store", ["corrupt-file", "refused-database", "unknown-driver"])
async def test_a_session_store_that_cannot_be_read_is_recorded_and_the_ticket_settled(
        desk, sqlite_url, tmp_path, store):
    locator = {
        # A file that is there but is no SQLite database.
        "corrupt-file": f"sqlite:{tmp_path / 'session.db'}",
        # A database server nobody listens for (port 1 on loopback).
        "refused-database": "database:postgresql+asyncpg://nobody@127.0.0.1:1/sessions",
        # A URL this process has no driver for.
        "unknown-driver": "database:nosuchdb+nodriver://somewhere/sessions",
    }[store]
    (tmp_path / "session.db").write_bytes(b"not a database " * 100)
    ledger = desk.ledger
    ticket = await ledger.tickets.open(
        app_name=APP, user_id="dave", session_id="elsewhere-store", call_id="adk-1",
        call_name="ask_for_approval", purpose="team lunch", amount_cents=25_000, ttl=timedelta(days=3),
        session_store=locator,
    )

    delivery = await Courier(desk).decide(ticket.id, approver="bob", approve=True)

    assert delivery.outcome in (Outcome.FAILED, Outcome.UNREACHABLE) and delivery.detail
    recorded = await ledger.tickets.get(ticket.id)
    assert recorded.delivery_error and recorded.delivered_at is None
    assert [entry.actor for entry in failures(await ledger.tickets.audit(ticket.id))] == ["bob"]
    _settled, payout = await ledger.deliveries.settle(ticket.id, approver="carol")
    assert payout is not None and payout.amount_cents == 25_000
