"""Notifications that are never lost: the outbox, the signed webhook, retries, replicas, reminders.

A real receiver on 127.0.0.1 (tests/support/receiver.py) takes the POSTs, or
sleeps on them, or dribbles its answer. Time is a FakeClock the tests move
(retries and reminders), never a sleep; a command run as its own process
keeps the real clock, so its retry is brought forward in the database.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import func, select, update
from support import cli
from support.conversation import Conversation, pending_calls, responses
from support.desks import TestDesk
from support.http import as_approver, assert_error, function_responses, new_session, run_body, user_text
from support.models import RecordedOfflineModel, make_runner, runner_with
from support.postgres import new_postgres_database
from support.processes import ROOT, run
from support.receiver import SECRET, Receiver
from support.servers import web_server, web_servers
from support.transcripts import normalize

from long_running_agent.delivery.courier import Courier
from long_running_agent.delivery.notes import NOTE_MARK
from long_running_agent.delivery.sweep import remind_due
from long_running_agent.ledger import Ledger
from long_running_agent.ledger.outbox import MAX_ATTEMPTS
from long_running_agent.ledger.storage.schema import NotificationRow
from long_running_agent.notifications import send_due

DOCS = ROOT / "docs" / "notifications.md"


def shown_in_docs(name: str) -> str:
    """A block of docs/notifications.md marked `<!-- notifications: name -->`."""
    [block] = re.findall(rf"<!-- notifications: {name} -->\n```\w+\n(.*?)```", DOCS.read_text(), re.S)
    return block


def shape(value: object) -> object:
    """The keys of a JSON document, all the way down, without the values."""
    if isinstance(value, dict):
        return {key: shape(inner) for key, inner in value.items()}
    return type(value).__name__ if isinstance(value, list) else None


@pytest.fixture
def receiver():
    with Receiver() as running:
        yield running


@pytest.fixture
def webhook(receiver, configure):
    configure(webhook_url=receiver.url, webhook_secret=SECRET)
    return receiver


async def ask(desk: TestDesk, text: str = "Please reimburse $250 for the team lunch",
              model=None) -> tuple[Conversation, str]:
    chat = await Conversation(runner_with(desk, model, None) if model else make_runner(desk)).start()
    [pending] = responses(await chat.say(text), "ask_for_approval")
    await desk.wait_for_background()  # the tool sent ticket.requested in the background (send_soon)
    return chat, pending["ticket_id"]


async def send(desk: TestDesk) -> list:
    return await send_due(desk.ledger, desk.settings)


async def test_each_event_is_posted_signed_with_an_id_a_timestamp_and_slack_text(desk, sqlite_url, webhook, clock):
    _chat, ticket_id = await ask(desk)
    assert [e["type"] for e in webhook.events()] == ["ticket.requested"]  # at once, from the tool
    await Courier(desk).decide(ticket_id, approver="bob", approve=True)

    attempts = await send(desk)

    assert [a.sent for a in attempts] == [True]
    first, second = webhook.received
    assert first.signed_with(SECRET) and second.signed_with(SECRET)
    assert not first.signed_with("another-secret-of-enough-length")
    events = webhook.events()
    assert [e["type"] for e in events] == ["ticket.requested", "ticket.approved"]
    assert len({e["id"] for e in events}) == 2 and all(e["timestamp"] == int(clock.now.timestamp()) for e in events)
    assert first.headers["X-Webhook-Id"] == events[0]["id"]
    assert events[0]["text"] == f"alice asks for $250.00 for team lunch: ticket {ticket_id}; it needs an approver."
    assert events[1]["text"] == f"Ticket {ticket_id} ($250.00 for team lunch, from alice) was approved by bob."
    assert events[1]["ticket"]["status"] == "approved" and events[1]["ticket"]["requester"] == "alice"
    assert [n.state for n in await desk.ledger.outbox.of_ticket(ticket_id)] == ["sent", "sent"]
    assert shape(json.loads(shown_in_docs("payload"))) == shape(events[1]), "docs/notifications.md shows old fields"
    assert await send(desk) == []  # nothing twice


async def test_a_pending_tickets_webhook_lists_the_requesters_other_requests_as_they_stand_when_sent(
        desk, sqlite_url, webhook, clock):
    _chat, first = await ask(desk, "Please reimburse $250 for the team lunch")
    _chat, second = await ask(desk, "Please reimburse $300 for a taxi")
    await Courier(desk).decide(first, approver="bob", approve=False, reason="not a team event")
    await send(desk)

    requested = {e["ticket"]["id"]: e["ticket"] for e in webhook.events() if e["type"] == "ticket.requested"}
    # Each went out as it was asked for: the first alone, the second beside the first, still pending then.
    assert requested[first]["requester_today"]["others"] == []
    assert requested[second]["requester_today"] == {
        "day": clock().date().isoformat(), "total": 550.0, "paid_without_approval": 0.0, "others_count": 1,
        "others": [{"id": first, "status": "pending", "amount": 250.0, "purpose": "team lunch"}]}
    [rejected] = [e for e in webhook.events() if e["type"] == "ticket.rejected"]
    assert "requester_today" not in rejected["ticket"]  # decided: nothing left for an approver to weigh


async def test_rejections_expiries_and_withdrawals_are_posted_too(desk, sqlite_url, webhook, clock):
    ledger = desk.ledger
    _chat, rejected = await ask(desk, "Please reimburse $250 for the team lunch")
    _chat, withdrawn = await ask(desk, "Please reimburse $480 for the conference ticket")
    _chat, expired = await ask(desk, "Please reimburse $300 for a keyboard")
    await ledger.tickets.decide(rejected, approver="bob", approve=False, reason="no receipt")
    await ledger.tickets.withdraw(withdrawn, requester="alice")
    clock.advance(hours=73)
    await ledger.tickets.expire_due()

    await send(desk)

    texts = {e["type"]: e["text"] for e in webhook.events() if e["type"] != "ticket.requested"}
    assert texts == {
        "ticket.rejected": f"Ticket {rejected} ($250.00 for team lunch, from alice) was rejected by bob: no receipt.",
        "ticket.withdrawn": f"Ticket {withdrawn} ($480.00 for conference ticket) was withdrawn by alice, who "
                            "asked for it.",
        "ticket.expired": f"Ticket {expired} ($300.00 for keyboard, from alice) expired before anyone decided it.",
    }


async def test_a_failing_receiver_is_retried_with_backoff_until_it_takes_it(desk, sqlite_url, webhook, clock):
    webhook.fail_first = 3
    _chat, ticket_id = await ask(desk)

    waits = []
    for _ in range(4):
        await send(desk)
        [notification] = await desk.ledger.outbox.of_ticket(ticket_id)
        if notification.sent_at:
            break
        waits.append(notification.next_attempt_at - clock.now)
        assert await send(desk) == []  # not due yet: nothing goes out before its time
        clock.advance(seconds=waits[-1].total_seconds())
    [notification] = await desk.ledger.outbox.of_ticket(ticket_id)
    assert notification.state == "sent" and notification.attempts == 3
    assert waits == [timedelta(seconds=5), timedelta(seconds=30), timedelta(seconds=120)]
    assert len(webhook.received) == 4 and len({r.json["id"] for r in webhook.received}) == 1


async def test_a_receiver_that_times_out_is_a_failed_attempt(desk, sqlite_url, webhook, clock, configure):
    _chat, ticket_id = await ask(desk)
    webhook.delay = 2
    configure(webhook_timeout=timedelta(seconds=0.3))
    await Courier(desk).decide(ticket_id, approver="bob", approve=True)
    [attempt] = await send(desk)
    assert not attempt.sent and attempt.notification.event == "ticket.approved"
    [approved] = [n for n in await desk.ledger.outbox.of_ticket(ticket_id) if n.event == "ticket.approved"]
    assert (approved.state, approved.attempts) == ("retrying", 1)
    assert approved.next_attempt_at == clock.now + timedelta(seconds=5)


async def open_directly(desk: TestDesk, purpose: str, session_id: str = "s1") -> str:
    """A ticket opened by the ledger itself, with no agent and so no send_soon: only a sender sends it."""
    ticket = await desk.ledger.tickets.open(
        app_name="long_running_agent", user_id="alice", session_id=session_id, call_id=f"c-{session_id}",
        call_name="ask_for_approval", purpose=purpose, amount_cents=25_000, ttl=timedelta(hours=72))
    return ticket.id


async def test_one_dribbling_receiver_holds_up_no_other_notification_and_is_retried_later(
        desk, sqlite_url, webhook, clock, configure):
    # A byte every half second: each read is quick, so only a deadline on the whole attempt ends it.
    configure(webhook_timeout=timedelta(seconds=1.5))
    webhook.trickle = 0.5
    webhook.slow = lambda event: event["ticket"]["purpose"] == "slow lunch"
    slow = await open_directly(desk, "slow lunch", "s1")
    quick = await open_directly(desk, "team lunch", "s2")  # due after the slow one, so behind it in a queue

    started = time.monotonic()
    attempts = await asyncio.wait_for(send(desk), timeout=20)
    took = time.monotonic() - started

    outcome = {a.notification.ticket_id: a.sent for a in attempts}
    assert outcome == {slow: False, quick: True}
    arrived = {r.json["ticket"]["id"]: r.at - started for r in webhook.received}
    assert arrived[quick] < 1.5, arrived  # side by side with the slow one, not after its 1.5-second deadline
    assert took < 1.5 + 7, took  # the round ends with the slow attempt's deadline, not its 50 s of dribble
    [slow_notification] = await desk.ledger.outbox.of_ticket(slow)
    assert (slow_notification.state, slow_notification.attempts) == ("retrying", 1)

    webhook.trickle = 0  # the receiver recovers: the outbox sends it on the next round that finds it due
    clock.advance(seconds=5)
    assert [(a.notification.ticket_id, a.sent) for a in await send(desk)] == [(slow, True)]
    assert [n.state for n in await desk.ledger.outbox.of_ticket(slow)] == ["sent"]


async def test_a_tickets_notifications_go_out_in_the_order_they_happened(desk, sqlite_url, webhook, clock,
                                                                         configure):
    configure(webhook_timeout=timedelta(seconds=1.5))
    webhook.delay = 0.9  # each answer: sent side by side, the later event would arrive first
    ticket_id = await open_directly(desk, "team lunch")
    clock.advance(minutes=1)
    await desk.ledger.tickets.decide(ticket_id, approver="bob", approve=False, reason="no receipt")

    first_round = await send(desk)

    # The first went through in 0.9 s; the second had 0.6 s left of the round, too little:
    # handed back untried, not counted against it.
    assert [(a.notification.event, a.sent) for a in first_round] == [("ticket.requested", True)]
    states = {n.event: (n.state, n.attempts) for n in await desk.ledger.outbox.of_ticket(ticket_id)}
    assert states == {"ticket.requested": ("sent", 0), "ticket.rejected": ("waiting", 0)}
    assert [(a.notification.event, a.sent) for a in await send(desk)] == [("ticket.rejected", True)]
    assert [e["type"] for e in webhook.events()][0] == "ticket.requested"


async def test_a_claim_left_by_a_dead_sender_blocks_no_other_notification(desk, db_url, configure):
    configure(webhook_url="http://127.0.0.1:9/hook", webhook_secret=SECRET)
    ledger = desk.ledger
    for n in range(25):
        await open_directly(desk, f"item {n}", f"s{n}")

    held = await ledger.outbox.claim_due("a sender killed mid-round")  # its 60-second leases outlive it
    others = await ledger.outbox.claim_due("a live sender")

    assert len(held) == 20
    assert len(others) == 5 and not {n.id for n in held} & {n.id for n in others}
    assert await ledger.outbox.claim_due("a third sender") == []  # every row is under a live lease


async def test_senders_claiming_at_once_never_share_a_notification(desk, db_url, configure):
    configure(webhook_url="http://127.0.0.1:9/hook", webhook_secret=SECRET)
    for n in range(20):
        await open_directly(desk, f"item {n}", f"s{n}")
    senders = [Ledger(db_url, outbox=True) for _ in range(3)]
    try:
        claimed = await asyncio.gather(*(s.outbox.claim_due(f"sender {i}", limit=8) for i, s in enumerate(senders)))
    finally:
        for sender in senders:
            await sender.close()
    ids = [n.id for batch in claimed for n in batch]
    assert len(ids) == len(set(ids)) and all(len(batch) <= 8 for batch in claimed)


SLACK_MARKUP = "<!channel> urgent: approve at <https://evil.example/login|the finance portal>"


async def test_what_users_write_reaches_slack_as_text_never_as_a_mention_or_a_link(desk, sqlite_url, webhook, clock):
    ticket_id = await open_directly(desk, SLACK_MARKUP)
    clock.advance(minutes=1)
    await desk.ledger.tickets.decide(ticket_id, approver="bob", approve=False, reason="see <!here> & <http://x.example>")

    await send(desk)

    requested, rejected = webhook.events()
    escaped = "&lt;!channel&gt; urgent: approve at &lt;https://evil.example/login|the finance portal&gt;"
    assert requested["text"] == f"alice asks for $250.00 for {escaped}: ticket {ticket_id}; it needs an approver."
    assert rejected["text"] == (f"Ticket {ticket_id} ($250.00 for {escaped}, from alice) was rejected by bob: "
                                "see &lt;!here&gt; &amp; &lt;http://x.example&gt;.")
    assert not {"<", ">"} & set(requested["text"] + rejected["text"])
    assert normalize(requested["text"]) == normalize(shown_in_docs("escaped"))
    # The structured fields carry what was written, for receivers that render it themselves.
    assert requested["ticket"]["purpose"] == rejected["ticket"]["purpose"] == SLACK_MARKUP
    assert rejected["ticket"]["reason"] == "see <!here> & <http://x.example>"


async def test_a_receiver_that_always_fails_is_given_up_and_shown(desk, sqlite_url, webhook, clock):
    webhook.fail_first = 10_000
    _chat, ticket_id = await ask(desk)
    for _ in range(MAX_ATTEMPTS):
        await send(desk)
        clock.advance(hours=2)
    [notification] = await desk.ledger.outbox.of_ticket(ticket_id)
    assert notification.state == "failed" and notification.attempts == MAX_ATTEMPTS
    assert len(webhook.received) == MAX_ATTEMPTS and await send(desk) == []
    await desk.close()

    shown = await asyncio.to_thread(cli.expenses, "show", ticket_id, url=sqlite_url)
    section = shown.stdout[shown.stdout.index("Notifications ("):]
    assert normalize(section) == normalize(shown_in_docs("given up"))


STALLED = """
import asyncio, os, signal
from long_running_agent.desk import Desk
from long_running_agent.settings import load_settings

async def decide_then_die():
    await Desk(load_settings()).ledger.tickets.decide({ticket!r}, approver="bob", approve=True)
    os.kill(os.getpid(), signal.SIGKILL)  # after the decision is committed, before any POST

asyncio.run(decide_then_die())
"""


@pytest.mark.subprocess
async def test_a_process_killed_after_the_decision_leaves_its_notification_to_be_sent(
        desk, sqlite_url, webhook, clock, tmp_path):
    _chat, ticket_id = await ask(desk)
    await desk.close()

    env = {"EXPENSES_DATABASE_URL": sqlite_url, "APPROVAL_WEBHOOK_URL": webhook.url,
           "APPROVAL_WEBHOOK_SECRET": SECRET, "AGENT_MODEL": "offline-expense-model"}
    killed = subprocess.run([sys.executable, "-c", STALLED.format(ticket=ticket_id)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    assert [e["type"] for e in webhook.events()] == ["ticket.requested"]

    # Whoever runs next sends it: here, any approver command.
    listed = run("inbox", url=sqlite_url, env=env)
    assert listed.returncode == 0, listed.stderr
    assert [e["type"] for e in webhook.wait_for(2)] == ["ticket.requested", "ticket.approved"]


@pytest.mark.subprocess
@pytest.mark.parametrize("slowness", [{"delay": 30}, {"trickle": 2}], ids=["sleeps", "dribbles"])
async def test_an_approver_command_returns_in_bounded_time_whatever_the_receiver_does(
        desk, sqlite_url, webhook, slowness):
    _chat, ticket_id = await ask(desk)
    await desk.close()
    env = {"APPROVAL_WEBHOOK_URL": webhook.url, "APPROVAL_WEBHOOK_SECRET": SECRET,
           "APPROVAL_WEBHOOK_TIMEOUT_SECONDS": "1"}
    for name, value in slowness.items():
        setattr(webhook, name, value)

    started = time.monotonic()
    approved = run("approve", ticket_id, "--approver", "bob", url=sqlite_url, env=env, timeout=60)
    took = time.monotonic() - started

    assert approved.returncode == 0, approved.stderr
    assert f"Payouts for {ticket_id}: 1" in approved.stdout
    # The command's own work (a Python start, seconds on a busy machine), then at most the 1-second
    # deadline: far from the receiver's 30 s of sleep or 200 s of dribble.
    assert took < 20, took
    [said] = [line for line in approved.stderr.splitlines() if line.startswith("(webhook:")]
    assert said == shown_in_docs("slow receiver").strip().replace("within 5 s", "within 1 s")
    assert [e["type"] for e in webhook.events()] == ["ticket.requested", "ticket.approved"]
    [notification] = [n for n in await desk.ledger.outbox.of_ticket(ticket_id) if n.event == "ticket.approved"]
    assert (notification.state, notification.attempts) == ("retrying", 1)  # left in the outbox

    # The receiver recovers; once the retry is due (brought forward, not waited for), the next command sends it.
    webhook.delay = webhook.trickle = 0
    await make_due(desk, notification.id)
    listed = run("inbox", url=sqlite_url, env=env)
    assert listed.returncode == 0, listed.stderr
    [notification] = [n for n in await desk.ledger.outbox.of_ticket(ticket_id) if n.event == "ticket.approved"]
    assert notification.state == "sent"
    assert [e["id"] for e in webhook.events()].count(notification.id) == 2  # sent at least once: twice here


async def make_due(desk: TestDesk, notification_id: str) -> None:
    """Move a retry's time into the past: the commands run on the real clock, and a backoff is seconds long."""
    ledger = desk.ledger
    async with await ledger.database.session() as db, db.begin():
        await db.execute(update(NotificationRow).where(NotificationRow.id == notification_id)
                         .values(next_attempt_at=ledger.now() - timedelta(seconds=1)))


@pytest.mark.subprocess
def test_a_request_from_the_command_line_notifies_before_the_command_ends(sqlite_url, receiver):
    env = {"APPROVAL_WEBHOOK_URL": receiver.url, "APPROVAL_WEBHOOK_SECRET": SECRET}

    result = run("request", "Please reimburse $250 for the team lunch", "--user", "alice", url=sqlite_url, env=env)

    assert result.returncode == 0, result.stderr
    [event] = receiver.events()  # no approver command ran: the tool sent it (send_soon), the command waited
    assert event["type"] == "ticket.requested" and receiver.received[0].signed_with(SECRET)


@pytest.mark.subprocess
async def test_the_server_notifies_and_answers_one_of_two_approvals_over_its_api(tmp_path, receiver):
    with web_server(tmp_path, APPROVAL_WEBHOOK_URL=receiver.url, APPROVAL_WEBHOOK_SECRET=SECRET) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
            session_id = await new_session(client, "alice")
            asked = await client.post("/run", json=run_body("alice", session_id, user_text(
                "Please reimburse $6,000 for the conference sponsorship")))
            [(_author, pending)] = function_responses(asked.json(), "ask_for_approval")
            ticket_id = pending["response"]["ticket_id"]
            assert [e["type"] for e in receiver.wait_for(1)] == ["ticket.requested"]

            first = await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("bob"))
            again = await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("bob"))
            second = await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("carol"))
            events = [e["type"] for e in receiver.wait_for(3)]
            shown = (await client.get(f"/api/approvals/{ticket_id}", headers=as_approver("carol"))).json()

    assert first.status_code == 200, first.text
    body = first.json()
    assert body["delivery"] == "waiting_for_second_approval" and body["payouts"] == []
    assert (body["ticket"]["approvals"], body["ticket"]["approved_by"]) == ("1 of 2", ["bob"])
    assert_error(again, 409, "already_approved_by_you")
    assert second.status_code == 200 and second.json()["delivery"] == "delivered"
    assert [p["amount"] for p in second.json()["payouts"]] == [6000.0]
    assert events == ["ticket.requested", "ticket.first_approval", "ticket.approved"]
    assert all(r.signed_with(SECRET) for r in receiver.received)
    assert [(n["event"], n["state"]) for n in shown["notifications"]] == [
        ("ticket.requested", "sent"), ("ticket.first_approval", "sent"), ("ticket.approved", "sent")]
    assert shown["ticket"]["approved_by"] == ["bob", "carol"]


@pytest.mark.subprocess
async def test_the_server_decides_at_once_and_sends_around_a_receiver_that_dribbles(tmp_path):
    def stalls(event):
        return event["type"] == "ticket.approved" and event["ticket"]["purpose"] == "slow lunch"

    with Receiver(trickle=1, slow=stalls) as receiver, web_server(
            tmp_path, APPROVAL_WEBHOOK_URL=receiver.url, APPROVAL_WEBHOOK_SECRET=SECRET,
            APPROVAL_WEBHOOK_TIMEOUT_SECONDS="6") as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
            tickets = {}
            for purpose in ("slow lunch", "team lunch"):
                session_id = await new_session(client, "alice")
                asked = await client.post("/run", json=run_body("alice", session_id, user_text(
                    f"Please reimburse $250 for the {purpose}")))
                [(_author, pending)] = function_responses(asked.json(), "ask_for_approval")
                tickets[purpose] = pending["response"]["ticket_id"]
            receiver.wait_for(2)

            started = time.monotonic()
            slow = await client.post(f"/api/approvals/{tickets['slow lunch']}/approve", headers=as_approver("bob"))
            took = time.monotonic() - started
            [slow_approved] = [r for r in _approvals(receiver, 1) if r.json["ticket"]["purpose"] == "slow lunch"]
            quick = await client.post(f"/api/approvals/{tickets['team lunch']}/approve", headers=as_approver("bob"))
            approvals = _approvals(receiver, 2)

            failed = await _approval_state(client, tickets["slow lunch"], "retrying", timeout=15)
            receiver.trickle = 0  # it recovers: the outbox sends the slow one again, after its backoff
            ledger = Ledger(server.database_url, outbox=True)
            try:
                await ledger.outbox.make_due(failed["id"])  # the backoff's 5 s, passed
            finally:
                await ledger.close()
            again = _approvals(receiver, 3, timeout=30)
            sent = await _approval_state(client, tickets["slow lunch"], "sent", timeout=10)

    assert slow.status_code == quick.status_code == 200 and slow.json()["delivery"] == "delivered"
    assert took < 5, took  # the decision never waits for a webhook
    by_purpose = {r.json["ticket"]["purpose"]: r for r in approvals}
    assert set(by_purpose) == {"slow lunch", "team lunch"}, server.log.read_text()[-2000:]
    # While the slow one was still dribbling (6 s deadline), the other one went out.
    assert by_purpose["team lunch"].at < slow_approved.at + 6
    assert (failed["state"], failed["attempts"]) == ("retrying", 1)  # the deadline ended it, not the receiver
    assert [r.json["id"] for r in again].count(slow_approved.json["id"]) == 2
    assert sent["state"] == "sent"


async def _approval_state(client: httpx.AsyncClient, ticket_id: str, state: str, timeout: float) -> dict:
    """The ticket.approved notification as the API shows it, once it reaches `state` (or the last seen)."""
    deadline = time.monotonic() + timeout
    while True:
        shown = (await client.get(f"/api/approvals/{ticket_id}", headers=as_approver("bob"))).json()
        [notification] = [n for n in shown["notifications"] if n["event"] == "ticket.approved"]
        if notification["state"] == state or time.monotonic() > deadline:
            return notification
        await asyncio.sleep(0.2)


def _approvals(receiver: Receiver, count: int, timeout: float = 10) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        approvals = [r for r in list(receiver.received) if r.json["type"] == "ticket.approved"]
        if len(approvals) >= count:
            return approvals
        time.sleep(0.05)
    return approvals


@pytest.mark.postgres
@pytest.mark.subprocess
def test_two_replicas_send_one_outbox_without_duplicates(tmp_path, postgres_admin_url):
    database_url = new_postgres_database(postgres_admin_url)
    with Receiver(delay=0.05) as receiver:
        quick = {"APPROVAL_WEBHOOK_URL": receiver.url, "APPROVAL_WEBHOOK_SECRET": SECRET,
                 "EXPIRY_SWEEP_SECONDS": "0.5"}
        with web_servers(tmp_path, 2, database_url=database_url, **quick) as replicas:
            asyncio.run(_open_tickets(database_url, 20))
            receiver.wait_for(20, timeout=60)
            asyncio.run(_outbox_at_rest(database_url, timeout=30))
            events = receiver.events()
        logs = [r.log.read_text() for r in replicas]
    assert len(events) == 20, logs
    assert len({e["id"] for e in events}) == 20
    assert all(r.signed_with(SECRET) for r in receiver.received)


async def _outbox_at_rest(database_url: str, timeout: float) -> None:
    """Wait until every notification is sent and none is claimed: no POST of one is still under way.

    A sent row is never claimed again (claim_due, tested above), so what the
    receiver holds then is all it will get, duplicates included.
    """
    ledger = Ledger(database_url)
    deadline = time.monotonic() + timeout
    try:
        while True:
            async with await ledger.database.session() as db:
                busy = await db.scalar(select(func.count()).select_from(NotificationRow).where(
                    NotificationRow.sent_at.is_(None) | NotificationRow.claimed_by.is_not(None)))
            if not busy:
                return
            assert time.monotonic() < deadline, f"{busy} notifications unsent or claimed after {timeout} s"
            await asyncio.sleep(0.1)
    finally:
        await ledger.close()


async def _open_tickets(database_url: str, count: int) -> None:
    ledger = Ledger(database_url, outbox=True)
    try:
        for n in range(count):
            await ledger.tickets.open(app_name="long_running_agent", user_id="alice", session_id=f"s{n}",
                                     call_id=f"c{n}", call_name="ask_for_approval", purpose=f"item {n}",
                                     amount_cents=25_000, ttl=timedelta(hours=72))
    finally:
        await ledger.close()


async def test_reminders_and_escalation_go_out_once_and_the_requester_is_told(desk, sqlite_url, webhook, clock,
                                                                              configure):
    configure(remind_before=timedelta(hours=24), escalate_to=("carol", "dave"))
    model = RecordedOfflineModel()
    chat, ticket_id = await ask(desk, model=model)
    ledger = desk.ledger
    calls_before = len(model.requests)

    clock.advance(hours=47)
    assert await remind_due(desk) == []
    clock.advance(hours=2)  # 23 hours left
    raced = await asyncio.gather(remind_due(desk), remind_due(desk))
    assert sorted(len(r) for r in raced) == [0, 1]  # two sweeps at once (two replicas): one reminder
    assert await remind_due(desk) == []

    actions = [(e.action, e.detail) for e in await ledger.tickets.audit(ticket_id)]
    assert ("escalated", "to carol, dave") in actions and [a for a, _ in actions].count("reminded") == 1
    await send(desk)
    events = {e["type"]: e for e in webhook.events()}
    assert set(events) == {"ticket.requested", "ticket.reminder", "ticket.escalated"}
    assert events["ticket.escalated"]["ticket"]["escalated_to"] == ["carol", "dave"]
    assert events["ticket.reminder"]["text"].startswith(f"Reminder: ticket {ticket_id} ($250.00 for team lunch")
    assert len(model.requests) == calls_before  # no model turn for any of it
    session = await chat.runner.session_service.get_session(app_name=chat.runner.app_name, user_id="alice",
                                                            session_id=chat.session_id)
    [note] = [e.content.parts[0].text for e in session.events if (e.custom_metadata or {}).get(NOTE_MARK)]
    assert ticket_id in note and "escalated to carol, dave" in note  # the requester is told, once


async def test_the_reminder_reaches_the_conversation_as_an_update_of_the_pending_call(
        desk, sqlite_url, webhook, clock, configure):
    configure(remind_before=timedelta(hours=24), escalate_to=("carol",))
    runner = make_runner(desk)
    chat = await Conversation(runner).start()
    events = await chat.say("Please reimburse $250 for the team lunch")
    [call] = pending_calls(events)
    clock.advance(hours=50)

    [reminded] = await remind_due(desk)

    session = await runner.session_service.get_session(app_name=runner.app_name, user_id="alice",
                                                       session_id=chat.session_id)
    [update] = [r for e in session.events if e.author == "user" for r in e.get_function_responses()]
    assert (update.id, update.name, update.response["status"]) == (call.id, "ask_for_approval", "pending")
    [note] = [e.content.parts[0].text for e in session.events if (e.custom_metadata or {}).get(NOTE_MARK)]
    assert f"Ticket {reminded.id} still waits for an approver" in note and "escalated to carol" in note
    # It never pays and never closes the call: the approval still resumes it, once.
    delivered = await Courier(desk).decide(reminded.id, approver="bob", approve=True)
    assert delivered.delivered and len(await desk.ledger.payouts.find(ticket_id=reminded.id)) == 1


def test_every_setting_is_checked_at_start(tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path}/x.db"
    for env, says in (
        ({"APPROVAL_WEBHOOK_URL": "http://127.0.0.1:9/hook"}, "APPROVAL_WEBHOOK_SECRET needs a value"),
        ({"APPROVAL_WEBHOOK_URL": "ftp://x", "APPROVAL_WEBHOOK_SECRET": SECRET}, "must be an http(s) URL"),
        ({"APPROVAL_REMIND_BEFORE_HOURS": "80"}, "must be less than APPROVAL_TTL_HOURS"),
        ({"ESCALATE_TO": "carol,Dave\u200b"}, "ESCALATE_TO"),
        ({"DUAL_APPROVAL_ABOVE": "0"}, "DUAL_APPROVAL_ABOVE"),
        ({"APPROVAL_WEBHOOK_TIMEOUT_SECONDS": "60"}, "APPROVAL_WEBHOOK_TIMEOUT_SECONDS"),
        ({"DUAL_APPROVAL_ABOVE": "50"}, "amounts in between would be paid with no approval"),
        ({"APPROVERS": "bob:token-bob-1,carol:token-carol", "ESCALATE_TO": "carol,dave"},
         "ESCALATE_TO names dave, who is not in APPROVERS"),
    ):
        result = cli.expenses("inbox", url=url, env=env)
        assert result.returncode != 0 and says in result.stderr, (env, result.stderr)
