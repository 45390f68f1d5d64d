"""Approving from Slack, for tests: the app with Slack approvals on, requests sent as Slack sends them, and what
the ledger, the conversation and the Slack message then say.

Its fixtures load as a plugin (tests/conftest.py): `fake_slack` is support/fake_slack.py's fake Slack on
127.0.0.1, and `slack_app` is `make web`'s server in-process on the test's desk, with Slack approvals on and
talking to that fake Slack.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from long_running_agent.ledger import TicketStatus

from .desks import TestDesk
from .fake_slack import BOT_TOKEN, SIGNING_SECRET, USERS, FakeSlack, signed
from .http import events_of, function_responses, new_session, run_body, user_text
from .receiver import SECRET
from .servers import LUNCH, TOKENS, in_process

INBOX = "https://expenses.example.com/inbox"


@pytest.fixture
def fake_slack() -> Iterator[FakeSlack]:
    with FakeSlack() as slack:
        yield slack


def slack_settings(slack: FakeSlack, **more: Any) -> dict[str, Any]:
    return {
        "approvers": {token: name for name, token in TOKENS.items()},
        "webhook_url": slack.url("/hook"), "webhook_secret": SECRET,
        "slack_signing_secret": SIGNING_SECRET, "slack_approvers": USERS, "slack_bot_token": BOT_TOKEN,
        "slack_api_url": slack.url("/api/"), "slack_inbox_url": INBOX,
        "slack_response_url_hosts": ("127.0.0.1",),  # the fake Slack's response_urls
    } | more


@pytest.fixture
async def slack_app(desk, fake_slack) -> AsyncIterator[httpx.AsyncClient]:
    """`make web` with Slack approvals on, talking to the fake Slack."""
    desk.configure(**slack_settings(fake_slack))
    async with in_process(desk) as client:
        yield client


async def ask(client: httpx.AsyncClient, text: str = LUNCH) -> tuple[str, str, str]:
    """alice asks over /run; returns (session id, the pending call's id, the ticket id)."""
    session_id = await new_session(client, "alice")
    asked = await client.post("/run", json=run_body("alice", session_id, user_text(text)))
    assert asked.status_code == 200, asked.text
    [(_author, pending)] = function_responses(asked.json(), "ask_for_approval")
    return session_id, pending["id"], pending["response"]["ticket_id"]


async def from_slack(desk: TestDesk, client: httpx.AsyncClient, payload: dict[str, Any] | str) -> httpx.Response:
    """POST a payload to /slack/actions as Slack does, signed at the desk's now; answered within Slack's 3 seconds."""
    body, headers = signed(payload, at=desk.ledger.now().timestamp())
    started = time.monotonic()
    answer = await client.post("/slack/actions", content=body, headers=headers)
    assert time.monotonic() - started < 3, "Slack gives up after 3 seconds"
    return answer


async def work_done(desk: TestDesk) -> None:
    """Wait for the clicks' background work, and for what that work started in turn."""
    for _ in range(5):
        await desk.wait_for_background()


async def all_sent(desk: TestDesk, ticket_id: str, timeout: float = 30) -> None:
    """Wait until every notification and Slack reply about the ticket is sent (none waiting, none in flight)."""
    deadline = time.monotonic() + timeout
    while {n.state for n in await desk.ledger.outbox.of_ticket(ticket_id)} - {"sent"}:
        assert time.monotonic() < deadline, await desk.ledger.outbox.of_ticket(ticket_id)
        await asyncio.sleep(0.05)


def form(kind: str, ticket_id: str, response_url: str) -> dict[str, Any]:
    """A form of this app as views.open received it, as far as its submission repeats it."""
    return {"callback_id": kind, "private_metadata": json.dumps({"ticket": ticket_id, "response_url": response_url})}


def outcome(message: dict[str, Any]) -> str | None:
    """The outcome line of an updated message; None if it has none (it still shows buttons)."""
    lines = [e["text"].strip("*") for b in message["blocks"] if b["type"] == "context" for e in b["elements"]]
    return lines[0] if lines else None


def buttons(message: dict[str, Any]) -> list[str]:
    return [e["action_id"] for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]]


async def conversation_says(client: httpx.AsyncClient, session_id: str, call_id: str) -> tuple[list, list]:
    """(the decisions the pending call got, the payouts reimburse reported), from the conversation itself."""
    events = await events_of(client, "alice", session_id)
    decisions = [(r["id"], r["response"]["status"]) for a, r in function_responses(events, "ask_for_approval")
                 if a == "user" and r["response"]["status"] != "pending"]
    paid = [(r["response"]["payout_id"], r["response"]["amount"]) for _a, r in function_responses(events, "reimburse")
            if r["response"]["status"] == "paid"]
    assert all(i == call_id for i, _ in decisions)
    return [status for _, status in decisions], paid


async def ledger_says(desk: TestDesk, ticket_id: str) -> tuple[TicketStatus, list[tuple[str, int]]]:
    ledger = desk.ledger
    ticket = await ledger.tickets.get(ticket_id)
    return ticket.status, [(p.id, p.amount_cents) for p in await ledger.payouts.find(ticket_id=ticket_id)]
