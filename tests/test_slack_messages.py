"""The Slack message keeps up with the ticket: posted with its buttons, updated to the ticket's state whatever
decided it, its replies retried until they are sent or given up, and a click a server never finished decided by
the next sweep, or by the next server.

A fake Slack on 127.0.0.1 (tests/support/fake_slack.py) takes the incoming webhook and each message's
response_url; `make web`'s server runs in-process on the test's desk (tests/support/slack_approvals.py), or,
where a process is killed, as its own process.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select
from support.desks import TestDesk
from support.fake_slack import BOB, BOT_TOKEN, SIGNING_SECRET, USERS, click, signed
from support.http import as_approver, run_body, user_text
from support.models import session_service
from support.receiver import SECRET
from support.servers import web_server
from support.slack_approvals import (
    INBOX,
    ask,
    buttons,
    conversation_says,
    from_slack,
    ledger_says,
    outcome,
    slack_settings,
    work_done,
)
from support.slack_docs import same_shape, shown_in_docs

from long_running_agent.delivery.courier import Courier
from long_running_agent.ledger import Ledger, TicketStatus
from long_running_agent.ledger.outbox import MAX_ATTEMPTS
from long_running_agent.ledger.storage.schema import NotificationRow, TicketRow
from long_running_agent.notifications import send_due
from long_running_agent.settings import SLACK_HOSTS
from long_running_agent.slack.actions import HOLD, SlackActions

# --- the message, as the ticket stands ----------------------------------------------------


async def test_a_new_ticket_is_posted_with_approve_reject_and_approve_less(slack_app, fake_slack):
    _session, _call, ticket_id = await ask(slack_app)

    [message] = await fake_slack.arrived("/hook")

    assert message["type"] == "ticket.requested" and message["text"].startswith("alice asks for $250.00")
    [actions] = [b for b in message["blocks"] if b["type"] == "actions"]
    assert [(e["action_id"], e["value"]) for e in actions["elements"]] == [
        ("approve", ticket_id), ("reject", ticket_id), ("approve_less", ticket_id)]
    fields = [f["text"] for b in message["blocks"] if b["type"] == "section" for f in b.get("fields", [])]
    assert {"*Requester*\nalice", "*Amount*\n$250.00", f"*Ticket*\n{ticket_id}"} <= set(fields)
    assert same_shape(message["blocks"], shown_in_docs("new ticket")["blocks"]), "docs/slack.md shows old blocks"


@pytest.mark.parametrize("elsewhere", ["rejected", "withdrawn", "expired"])
async def test_a_click_on_a_ticket_decided_elsewhere_updates_the_message_to_its_state(
        desk, clock, slack_app, fake_slack, elsewhere):
    session_id, call_id, ticket_id = await ask(slack_app)
    if elsewhere == "rejected":
        rejected = await slack_app.post(f"/api/approvals/{ticket_id}/reject", headers=as_approver("carol"),
                                        json={"reason": "not a business expense"})
        assert rejected.status_code == 200, rejected.text
    elif elsewhere == "withdrawn":
        await slack_app.post("/run", json=run_body("alice", session_id, user_text("Please cancel my request")))
    else:
        clock.advance(hours=73)
    expected = {"rejected": "Rejected by carol: not a business expense", "withdrawn": "Withdrawn",
                "expired": "Expired"}[elsewhere]

    await from_slack(desk, slack_app, click(BOB, "approve", ticket_id, fake_slack.url("/response/late")))
    await work_done(desk)

    [update] = [m for m in await fake_slack.arrived("/response/late", 2) if m.get("replace_original")]
    assert outcome(update) == expected and buttons(update) == []
    status, payouts = await ledger_says(desk, ticket_id)
    assert status.value == elsewhere and payouts == []
    decisions, paid = await conversation_says(slack_app, session_id, call_id)
    assert decisions == [status.value] and paid == []


async def test_an_approval_whose_conversation_is_gone_is_said_and_the_message_waits_for_the_settlement(
        desk, clock, slack_app, fake_slack):
    session_id, _call, ticket_id = await ask(slack_app)
    # Deleted behind the app's back and started again empty: the decision has nothing to answer.
    store = session_service(desk, desk.settings.database_url)
    await store.delete_session(app_name="long_running_agent", user_id="alice", session_id=session_id)
    await store.create_session(app_name="long_running_agent", user_id="alice", session_id=session_id)
    await store.db_engine.dispose()

    await from_slack(desk, slack_app, click(BOB, "approve", ticket_id, fake_slack.url("/response/gone")))
    await work_done(desk)
    [said] = await fake_slack.arrived("/response/gone")
    assert said["response_type"] == "ephemeral" and "Settle on the inbox page" in said["text"]
    assert (await _slack_update(desk, ticket_id, attempts=0)).state == "waiting"  # not "not paid yet": not yet

    settled = await slack_app.post(f"/api/approvals/{ticket_id}/settle", headers=as_approver("carol"))
    assert settled.status_code == 200, settled.text
    clock.advance(seconds=5)
    await send_due(desk.ledger, desk.settings)

    [_said, update] = await fake_slack.arrived("/response/gone", 2)
    [(payout_id, cents)] = (await ledger_says(desk, ticket_id))[1]
    assert cents == 25_000 and outcome(update) == f"Approved by bob · paid $250.00 · {payout_id}"


# --- the replies, retried --------------------------------------------------------------------


async def test_a_response_url_that_fails_then_recovers_gets_the_outcome(desk, clock, slack_app, fake_slack):
    fake_slack.fail_responses = 2
    _session, _call, ticket_id = await ask(slack_app)

    await from_slack(desk, slack_app, click(BOB, "approve", ticket_id, fake_slack.url("/response/flaky")))
    await work_done(desk)
    update = await _slack_update(desk, ticket_id)
    assert (update.state, update.attempts) == ("retrying", 1)

    for tried in (2, 3):  # the backoff, on the test's clock: 5 s, then 30 s
        clock.advance(seconds=(update.next_attempt_at - clock.now).total_seconds())
        await send_due(desk.ledger, desk.settings)  # or the server's sender, whichever claims it
        update = await _slack_update(desk, ticket_id, attempts=tried)

    attempts = await fake_slack.arrived("/response/flaky", 3)
    assert update.state == "sent" and len(attempts) == 3
    [(payout_id, _cents)] = (await ledger_says(desk, ticket_id))[1]
    assert {outcome(m) for m in attempts} == {f"Approved by bob · paid $250.00 · {payout_id}"}


@pytest.mark.parametrize("paid", [True, False], ids=["paid", "never paid"])
async def test_an_approved_tickets_message_waits_for_its_payout_and_no_sender_calls_that_a_failure(
        clock, fake_slack, configure, paid):
    desk = configure(**slack_settings(fake_slack))
    ledger = desk.ledger
    ticket = await ledger.tickets.open(
        app_name="long_running_agent", user_id="alice", session_id="s1", call_id="c1", call_name="ask_for_approval",
        purpose="team lunch", amount_cents=25_000, ttl=timedelta(hours=72))
    await ledger.tickets.decide(ticket.id, approver="bob", approve=True)  # decided; its delivery still to come
    async with await ledger.database.session() as db, db.begin():
        ledger.outbox.add_message(db, ticket_id=ticket.id, event="slack.update",
                                  body={"response_url": fake_slack.url("/response/w")}, due=clock.now)

    attempts = await send_due(ledger, desk.settings)

    update = await _slack_update(desk, ticket.id, attempts=0)
    assert sorted(a.notification.event for a in attempts) == ["ticket.approved", "ticket.requested"]  # no reply
    assert (update.state, update.attempts, update.next_attempt_at) == ("waiting", 0, clock.now + timedelta(seconds=5))
    if paid:
        payout, _again = await ledger.payouts.pay_approved(conversation=ticket.conversation, call_id="c2",
                                                           purpose="team lunch", amount_cents=25_000)
    clock.advance(seconds=5 if paid else 25 * 60)
    await send_due(ledger, desk.settings)

    [message] = await fake_slack.arrived("/response/w")
    assert outcome(message) == (f"Approved by bob · paid $250.00 · {payout.id}" if paid
                                else "Approved by bob · not paid yet")


@pytest.mark.parametrize("response_url", [
    "http://127.0.0.1:{port}/response/evil", "ftp://hooks.slack.com/actions/1", "http://[::1",
    "https://hooks.slack.com:99999/actions/1",
], ids=["loopback", "ftp", "unparsable", "no such port"])
async def test_a_reply_whose_url_cannot_be_used_counts_each_attempt_once_and_is_given_up(
        clock, fake_slack, configure, caplog, response_url):
    desk = configure(**slack_settings(fake_slack, slack_response_url_hosts=SLACK_HOSTS))
    ledger = desk.ledger
    ticket = await ledger.tickets.open(
        app_name="long_running_agent", user_id="alice", session_id="s1", call_id="c1", call_name="ask_for_approval",
        purpose="team lunch", amount_cents=25_000, ttl=timedelta(hours=72))
    # Written before this server checked response_urls where they arrive: checked again where they are used.
    async with await ledger.database.session() as db, db.begin():
        reply_id = ledger.outbox.add_message(db, ticket_id=ticket.id, event="slack.reply", due=clock.now, body={
            "response_url": response_url.format(port=fake_slack.url("").rsplit(":", 1)[1]),
            "message": {"text": f"ticket {ticket.id}: requester alice, $250.00, team lunch"}})
    caplog.set_level(logging.INFO, logger="long_running_agent")

    for tried in range(1, MAX_ATTEMPTS + 1):
        attempts = await send_due(ledger, desk.settings)
        [reply] = [n for n in await ledger.outbox.of_ticket(ticket.id) if n.id == reply_id]
        assert [a.sent for a in attempts if a.notification.id == reply_id] == [False]
        assert reply.attempts == tried
        clock.advance(seconds=(reply.next_attempt_at - clock.now).total_seconds() + 1)

    assert reply.state == "failed"
    assert reply_id not in [a.notification.id for a in await send_due(ledger, desk.settings)]  # given up
    lines = [r for r in caplog.records if reply_id in r.getMessage()]
    assert len(lines) == MAX_ATTEMPTS and not any(r.exc_info for r in caplog.records)
    assert [p.path for p in fake_slack.posted] == ["/hook"]


async def _slack_update(desk: TestDesk, ticket_id: str, attempts: int = 1, timeout: float = 30):
    """The ticket's slack.update row, once `attempts` POSTs of it are over (the last one sent, or failed)."""
    deadline = time.monotonic() + timeout
    while True:
        [update] = [n for n in await desk.ledger.outbox.of_ticket(ticket_id) if n.event == "slack.update"]
        tried = update.attempts + (update.state == "sent")
        if tried >= attempts or time.monotonic() > deadline:
            return update
        await asyncio.sleep(0.05)


# --- a click a server never finished -------------------------------------------------------


async def test_a_click_answered_by_a_server_that_died_before_deciding_is_decided_by_the_next_sweep(
        desk, clock, slack_app, fake_slack, monkeypatch):
    session_id, call_id, ticket_id = await ask(slack_app)
    # The server answers Slack, then dies before its background work starts: none of it runs.
    monkeypatch.setattr(desk, "in_background", lambda work: work.close())
    answer = await from_slack(desk, slack_app, click(BOB, "approve", ticket_id, fake_slack.url("/response/lost")))
    monkeypatch.undo()
    assert answer.status_code == 200 and await ledger_says(desk, ticket_id) == (TicketStatus.PENDING, [])

    clock.advance(seconds=31)  # the message's update is due: it shows the ticket as it stands, still waiting
    await send_due(desk.ledger, desk.settings)
    [waiting] = await fake_slack.arrived("/response/lost")
    assert outcome(waiting) is None and buttons(waiting) == ["approve", "reject", "approve_less"]

    clock.advance(minutes=2)
    sweep = SlackActions(desk, decide=Courier(desk).decide, send=send_due)
    assert await sweep.decide_left_over() == 1 and await sweep.decide_left_over() == 0  # the sweep's work, once
    await work_done(desk)

    status, [(payout_id, cents)] = await ledger_says(desk, ticket_id)
    assert (status, cents) == (TicketStatus.APPROVED, 25_000)
    assert await conversation_says(slack_app, session_id, call_id) == (["approved"], [(payout_id, 250.0)])
    [_waiting, update] = await fake_slack.arrived("/response/lost", 2)
    assert outcome(update) == f"Approved by bob · paid $250.00 · {payout_id}"
    audit = (await slack_app.get(f"/api/approvals/{ticket_id}", headers=as_approver("carol"))).json()["audit"]
    assert [(e["action"], e["actor"]) for e in audit if e["action"] == "approved"] == [("approved", "bob")]


@pytest.mark.subprocess
async def test_a_server_killed_between_the_click_and_the_delivery_finishes_both_after_a_restart(
        tmp_path, fake_slack):
    env = {
        "APPROVAL_WEBHOOK_URL": fake_slack.url("/hook"), "APPROVAL_WEBHOOK_SECRET": SECRET,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_APPROVERS": ",".join(f"{user}:{name}" for user, name in USERS.items()),
        "SLACK_API_URL": fake_slack.url("/api/"), "SLACK_INBOX_URL": INBOX, "EXPIRY_SWEEP_SECONDS": "1",
        "SLACK_RESPONSE_URL_HOSTS": "127.0.0.1",
    }
    with web_server(tmp_path, name="first", **env) as first:
        assert f"Slack:     {first.base_url}/slack/actions" in first.log.read_text()  # the URL to give Slack
        ledger = Ledger(first.database_url)
        async with httpx.AsyncClient(base_url=first.base_url, timeout=60) as client:
            session_id, call_id, ticket_id = await ask(client)
            conversation = (await ledger.tickets.get(ticket_id)).conversation
            # The conversation is busy (its lock held here, as by a long run): the delivery waits behind it.
            async with ledger.locks.hold(conversation, purpose="a long run"):
                body, headers = signed(click(BOB, "approve", ticket_id, fake_slack.url("/response/k")),
                                       at=time.time())
                answer = await client.post("/slack/actions", content=body, headers=headers)
                assert answer.status_code == 200, answer.text
                await _until(lambda: _status(ledger, ticket_id), TicketStatus.APPROVED)
                assert first.process is not None
                os.kill(first.process.pid, signal.SIGKILL)  # decided; not delivered, the message not updated
                first.process.wait()
        assert fake_slack.at("/response/k") == [] and await ledger.payouts.find(ticket_id=ticket_id) == []
    await _down_for(ledger, HOLD)  # how long the next server waits before it may take the click's work over

    with web_server(tmp_path, database_url=first.database_url, name="second", **env) as second:
        [update] = await fake_slack.arrived("/response/k", timeout=120)
        async with httpx.AsyncClient(base_url=second.base_url, timeout=60) as client:
            said = await conversation_says(client, session_id, call_id)
    try:
        status = await _status(ledger, ticket_id)
        [(payout_id, cents)] = [(p.id, p.amount_cents) for p in await ledger.payouts.find(ticket_id=ticket_id)]
    finally:
        await ledger.close()

    assert (status, cents) == (TicketStatus.APPROVED, 25_000)
    assert said == (["approved"], [(payout_id, 250.0)])
    assert outcome(update) == f"Approved by bob · paid $250.00 · {payout_id}"
    assert len(fake_slack.at("/response/k")) == 1


async def _down_for(ledger: Ledger, gone: timedelta) -> None:
    """As if the server had been down for `gone`: the ledger's decisions and messages that long older."""
    async with await ledger.database.session() as db, db.begin():
        for row in (await db.scalars(select(TicketRow).where(TicketRow.decided_at.is_not(None)))).all():
            row.decided_at -= gone
        for message in (await db.scalars(select(NotificationRow))).all():
            message.next_attempt_at -= gone


async def _status(ledger: Ledger, ticket_id: str) -> TicketStatus:
    return (await ledger.tickets.get(ticket_id)).status


async def _until(read, expected, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while (seen := await read()) != expected:
        assert time.monotonic() < deadline, f"still {seen} after {timeout} s"
        await asyncio.sleep(0.1)
