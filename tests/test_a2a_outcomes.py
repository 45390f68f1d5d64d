"""What ends an A2A task: approvers on their own channels, the requester withdrawing, expiry; the push of
the outcome to the client; and races between them, which pay at most once.

`make web`'s server runs in this process on a real loopback socket (support/a2a_calls.py). A task's state is the
ledger's: each test decides on another channel (the approvals API, the chat, the clock), then reads the task and the
ledger both. Pushes go to a receiver on 127.0.0.1 (support/receiver.py); the test runs the server's push queue and
outbox sender itself, and moves the desk's clock past the outbox's backoff instead of sleeping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from datetime import timedelta
from typing import TypeVar

import httpx
import pytest
from support.a2a_calls import (
    LUNCH,
    as_approver,
    call,
    data_of,
    error_code,
    get_task,
    message,
    payouts_of,
    result,
    send,
    serving,
    state,
    text,
    ticket_of,
    with_clients,
)
from support.http import run_body, user_text
from support.receiver import Receiver

from long_running_agent.a2a import ExpenseTasks
from long_running_agent.a2a.records import session_of
from long_running_agent.delivery.courier import Courier
from long_running_agent.delivery.sweep import deliver_due
from long_running_agent.ledger import TicketStatus
from long_running_agent.ledger.outbox import A2A_PUSH, BACKOFF
from long_running_agent.ledger.storage.schema import NotificationRow
from long_running_agent.notifications import send_due
from long_running_agent.web import server as web_server

INVALID_PARAMS, TASK_NOT_CANCELABLE = -32602, -32002
PUSH_TOKEN = "push-token-of-travel-bot"
T = TypeVar("T")


@pytest.fixture
async def a2a(desk):
    async with serving(with_clients(desk)) as client:
        yield client


async def approve(client: httpx.AsyncClient, ticket_id: str, approver: str = "carol") -> httpx.Response:
    return await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver(approver))


# --- approvers decide on other channels ----------------------------------------------------------


async def test_an_approval_through_the_api_completes_the_task_with_its_one_payout(desk, a2a):
    task = await send(a2a, "travel-bot")
    ticket_id = ticket_of(task)["ticket_id"]

    assert (await approve(a2a, ticket_id, "carol")).status_code == 200

    done = await get_task(a2a, "travel-bot", task["id"])
    [paid] = await desk.ledger.payouts.find(ticket_id=ticket_id)
    assert state(done) == "completed"
    [payout] = payouts_of(done)
    assert (payout["artifact_id"], payout["payout_id"], payout["amount"]) == (paid.id, paid.id, 250)
    assert (payout["approved_by"], paid.amount_cents) == (["carol"], 25000)
    # An ended task takes no more messages; the conversation goes on in a new task.
    later = message(text("thanks"), task_id=task["id"], context_id=task["contextId"])
    assert error_code(await call(a2a, "travel-bot", "SendMessage", {"message": later})) == INVALID_PARAMS


async def test_a_rejection_with_a_reason_rejects_the_task_with_that_reason(desk, a2a):
    task = await send(a2a, "travel-bot")
    ticket_id = ticket_of(task)["ticket_id"]
    reason = "team lunches come out of the team budget"

    rejected = await a2a.post(f"/api/approvals/{ticket_id}/reject", json={"reason": reason},
                              headers=as_approver("bob"))

    assert rejected.status_code == 200, rejected.text
    done = await get_task(a2a, "travel-bot", task["id"])
    assert state(done) == "rejected" and payouts_of(done) == []
    assert reason in done["status"]["message"]["parts"][0]["text"] and ticket_of(done)["reason"] == reason
    assert await desk.ledger.payouts.find(ticket_id=ticket_id) == []


async def test_the_requesters_cancel_withdraws_the_ticket_once(desk, a2a):
    task = await send(a2a, "travel-bot")
    ticket_id = ticket_of(task)["ticket_id"]

    canceled = await result(a2a, "travel-bot", "CancelTask", {"id": task["id"]})
    again = await call(a2a, "travel-bot", "CancelTask", {"id": task["id"]})

    assert state(canceled) == "canceled" and data_of(canceled)["canceled_because"] == "withdrawn"
    assert (await desk.ledger.tickets.get(ticket_id)).status is TicketStatus.WITHDRAWN
    assert error_code(again) == TASK_NOT_CANCELABLE
    assert state(await get_task(a2a, "travel-bot", task["id"])) == "canceled"
    assert (await approve(a2a, ticket_id)).status_code == 409  # and no approver can pay it now
    assert await desk.ledger.payouts.find(ticket_id=ticket_id) == []


@pytest.mark.parametrize("ended_by", ["withdrawn", "expired"])
async def test_a_ticket_withdrawn_in_the_chat_or_expired_cancels_the_task_saying_which(desk, clock, a2a, ended_by):
    task = await send(a2a, "travel-bot")
    ticket_id = ticket_of(task)["ticket_id"]

    if ended_by == "withdrawn":  # in the chat (ADK's /run), in the conversation the task's context runs in
        words = user_text(f"Please withdraw {ticket_id}")
        answer = await a2a.post("/run", json=run_body("travel-bot", session_of("travel-bot", task["contextId"]), words))
        assert answer.status_code == 200, answer.text
    else:  # past its expiry, then the server's sweep
        clock.advance(seconds=desk.settings.approval_ttl.total_seconds() + 60)
        await deliver_due(desk, actor="expiry sweep")

    done = await get_task(a2a, "travel-bot", task["id"])
    assert state(done) == "canceled" and data_of(done)["canceled_because"] == ended_by
    assert (await desk.ledger.tickets.get(ticket_id)).status is TicketStatus(ended_by)
    assert await desk.ledger.payouts.find(ticket_id=ticket_id) == []


# --- the outcome, pushed -----------------------------------------------------------------------


@pytest.fixture
def pushing(desk, monkeypatch):
    """A2A clients set, and the server's own push queue and sender out of the way: the test runs them."""
    monkeypatch.setattr(web_server, "SEND_INTERVAL", 3600.0)
    return with_clients(desk, sweep_interval=timedelta(hours=1))


@pytest.fixture
def receiver():
    with Receiver() as running:
        yield running


async def queue(desk) -> int:
    """The server's push queue, run once (a replica's would be another ExpenseTasks on the same database)."""
    return await ExpenseTasks(desk, Courier(desk), desk.sessions, desk.settings.a2a_push_hosts).queue_pushes()


async def pushes_queued(desk) -> int:
    async with await desk.ledger.database.session() as db:
        return len(list(await db.scalars(NotificationRow.__table__.select().where(NotificationRow.event == A2A_PUSH))))


async def test_the_outcome_is_pushed_once_with_the_clients_token(desk, pushing, receiver):
    async with serving(desk) as a2a:
        task = await send(a2a, "travel-bot")
        push = {"taskId": task["id"], "url": receiver.url, "token": PUSH_TOKEN}
        await result(a2a, "travel-bot", "CreateTaskPushNotificationConfig", push)
        while_working = await queue(desk)
        assert (await approve(a2a, ticket_of(task)["ticket_id"])).status_code == 200
        queued = sorted(await asyncio.gather(queue(desk), queue(desk)))  # two replicas at once: one queues it
        await send_due(desk.ledger, desk.settings)
        await send_due(desk.ledger, desk.settings)
        [paid] = await desk.ledger.payouts.find(ticket_id=ticket_of(task)["ticket_id"])

    assert (while_working, queued, await pushes_queued(desk)) == (0, [0, 1], 1)
    [pushed] = receiver.received
    assert pushed.headers["X-A2A-Notification-Token"] == PUSH_TOKEN
    assert list(pushed.json) == ["task"] and pushed.json["task"]["id"] == task["id"]
    assert state(pushed.json["task"]) == "completed"
    assert [p["payout_id"] for p in payouts_of(pushed.json["task"])] == [paid.id]


async def test_a_push_the_receiver_fails_is_sent_again_after_the_backoff_until_taken(desk, clock, pushing):
    with Receiver(fail_first=1) as receiver:
        async with serving(desk) as a2a:
            configured = {"taskPushNotificationConfig": {"url": receiver.url, "token": PUSH_TOKEN}}
            params = {"message": message(text(LUNCH)), "configuration": configured}
            task = (await result(a2a, "travel-bot", "SendMessage", params))["task"]
            rejected = await a2a.post(f"/api/approvals/{ticket_of(task)['ticket_id']}/reject",
                                      json={"reason": "not a business expense"}, headers=as_approver("bob"))
            assert rejected.status_code == 200, rejected.text
            await queue(desk)
            tries = []
            for wait in (0, 0, BACKOFF[0] + 1, 3600):  # at once, again too soon, after the backoff, long after
                clock.advance(seconds=wait)
                await send_due(desk.ledger, desk.settings)
                tries.append(len(receiver.received))

    assert tries == [1, 1, 2, 2]
    assert receiver.received[0].body == receiver.received[1].body
    assert {r.headers["X-A2A-Notification-Token"] for r in receiver.received} == {PUSH_TOKEN}
    assert state(receiver.received[1].json["task"]) == "rejected"


def push_allowed(url: str, push_hosts: tuple[str, ...]) -> bool:
    """The rule: a loopback URL, or https to a host A2A_PUSH_HOSTS names (plain http only to loopback)."""
    parsed = httpx.URL(url)
    return parsed.host in ("127.0.0.1", "localhost", "::1") or (parsed.scheme == "https" and parsed.host in push_hosts)


@pytest.mark.parametrize("url, push_hosts", [
    ("http://example.com/hook", ()), ("https://example.com/hook", ()), ("https://example.com/hook", ("example.com",)),
    ("http://example.com/hook", ("example.com",)), ("https://evil.example.com/hook", ("example.com",)),
    ("http://127.0.0.1:9/hook", ()),
])
async def test_a_push_url_is_taken_only_on_loopback_or_over_https_to_a_host_the_server_allows(desk, url, push_hosts):
    async with serving(with_clients(desk, a2a_push_hosts=push_hosts)) as a2a:
        task = await send(a2a, "travel-bot")
        answer = await call(a2a, "travel-bot", "CreateTaskPushNotificationConfig",
                            {"taskId": task["id"], "url": url, "token": PUSH_TOKEN})
        kept = await result(a2a, "travel-bot", "ListTaskPushNotificationConfigs", {"taskId": task["id"]})

    if push_allowed(url, push_hosts):
        assert answer["result"]["url"] == url and [c["url"] for c in kept["configs"]] == [url]
    else:
        assert error_code(answer) == INVALID_PARAMS and kept.get("configs", []) == []


# --- races pay once ------------------------------------------------------------------------------


async def later(seconds: float, work: Awaitable[T]) -> T:
    await asyncio.sleep(seconds)
    return await work


async def test_approvals_racing_a_cancel_pay_at_most_once_and_the_task_agrees_with_the_ledger(desk, db_url, a2a):
    # The two approvals start together; the cancel as they do, or a little before them (it reads more first).
    for lead in (0.0, 0.002, 0.005, 0.01, 0.05):
        task = await send(a2a, "travel-bot")
        ticket_id = ticket_of(task)["ticket_id"]

        by_bob, by_carol, cancel = await asyncio.gather(
            later(lead, approve(a2a, ticket_id, "bob")), later(lead, approve(a2a, ticket_id, "carol")),
            call(a2a, "travel-bot", "CancelTask", {"id": task["id"]}))

        ticket = await desk.ledger.tickets.get(ticket_id)
        paid = await desk.ledger.payouts.find(ticket_id=ticket_id)
        final = await get_task(a2a, "travel-bot", task["id"])
        won = [by_bob.status_code == 200, by_carol.status_code == 200, "result" in cancel]
        assert sum(won) == 1, (by_bob.text, by_carol.text, cancel)
        if ticket.status is TicketStatus.APPROVED:
            assert state(final) == "completed" and [p["payout_id"] for p in payouts_of(final)] == [paid[0].id]
            assert len(paid) == 1 and error_code(cancel) == TASK_NOT_CANCELABLE
        else:
            assert (ticket.status, state(final), paid) == (TicketStatus.WITHDRAWN, "canceled", [])
            assert won == [False, False, True]
