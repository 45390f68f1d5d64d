"""Approving from Slack: buttons in the message, clicks verified, every rule of the API, one payout at most.

A fake Slack on 127.0.0.1 (tests/support/fake_slack.py) takes the incoming
webhook, each message's response_url and the Web API's views.open; requests
from Slack are signed with slack_sdk's own SignatureVerifier. `make web`'s
server runs in-process (or, where a process is killed, as its own process).
Every test ends with the ledger, the conversation and the Slack message
saying the same thing.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from support.desks import current
from support.fake_slack import BOT_TOKEN, SIGNING_SECRET, STRANGER, USERS, FakeSlack, click, signed, submission
from support.http import as_approver, events_of, function_responses, new_session, run_body, user_text
from support.models import session_service
from support.processes import ROOT
from support.receiver import SECRET
from support.servers import LUNCH, TOKENS, in_process, web_server

from long_running_agent.delivery.courier import Courier
from long_running_agent.ledger import Ledger, TicketStatus
from long_running_agent.ledger.outbox import MAX_ATTEMPTS
from long_running_agent.ledger.storage.schema import NotificationRow, TicketRow
from long_running_agent.notifications import send_due
from long_running_agent.settings import SLACK_HOSTS, load_settings
from long_running_agent.slack.actions import HOLD, SlackActions
from long_running_agent.slack.payloads import refused_response_url

DOCS = ROOT / "docs" / "slack.md"
INBOX = "https://expenses.example.com/inbox"
BOB, CAROL, ALICE = "UBOB0001", "UCAROL001", "UALICE001"


@pytest.fixture
def fake_slack():
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
async def app(fake_slack, configure) -> AsyncIterator[httpx.AsyncClient]:
    """`make web` with Slack approvals on, talking to the fake Slack."""
    configure(**slack_settings(fake_slack))
    async with in_process() as client:
        yield client


async def ask(client: httpx.AsyncClient, text: str = LUNCH) -> tuple[str, str, str]:
    """alice asks over /run; returns (session id, the pending call's id, the ticket id)."""
    session_id = await new_session(client, "alice")
    asked = await client.post("/run", json=run_body("alice", session_id, user_text(text)))
    assert asked.status_code == 200, asked.text
    [(_author, pending)] = function_responses(asked.json(), "ask_for_approval")
    return session_id, pending["id"], pending["response"]["ticket_id"]


async def from_slack(client: httpx.AsyncClient, payload: dict[str, Any] | str) -> httpx.Response:
    """POST a payload to /slack/actions as Slack does, signed now; answered within Slack's 3 seconds."""
    body, headers = signed(payload, at=current().ledger.now().timestamp())
    started = time.monotonic()
    answer = await client.post("/slack/actions", content=body, headers=headers)
    assert time.monotonic() - started < 3, "Slack gives up after 3 seconds"
    return answer


async def work_done() -> None:
    """Wait for the clicks' background work, and for what that work started in turn."""
    for _ in range(5):
        await current().wait_for_background()


async def all_sent(ticket_id: str, timeout: float = 30) -> None:
    """Wait until every notification and Slack reply about the ticket is sent (none waiting, none in flight)."""
    deadline = time.monotonic() + timeout
    while {n.state for n in await current().ledger.outbox.of_ticket(ticket_id)} - {"sent"}:
        assert time.monotonic() < deadline, await current().ledger.outbox.of_ticket(ticket_id)
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


async def ledger_says(ticket_id: str) -> tuple[TicketStatus, list[tuple[str, int]]]:
    ledger = current().ledger
    ticket = await ledger.tickets.get(ticket_id)
    return ticket.status, [(p.id, p.amount_cents) for p in await ledger.payouts.find(ticket_id=ticket_id)]


# --- the message -----------------------------------------------------------------------------


async def test_a_new_ticket_is_posted_with_approve_reject_and_approve_less(app, fake_slack):
    _session, _call, ticket_id = await ask(app)

    [message] = await fake_slack.arrived("/hook")

    assert message["type"] == "ticket.requested" and message["text"].startswith("alice asks for $250.00")
    [actions] = [b for b in message["blocks"] if b["type"] == "actions"]
    assert [(e["action_id"], e["value"]) for e in actions["elements"]] == [
        ("approve", ticket_id), ("reject", ticket_id), ("approve_less", ticket_id)]
    fields = [f["text"] for b in message["blocks"] if b["type"] == "section" for f in b.get("fields", [])]
    assert {"*Requester*\nalice", "*Amount*\n$250.00", f"*Ticket*\n{ticket_id}"} <= set(fields)
    assert _same_shape(message["blocks"], shown_in_docs("new ticket")["blocks"]), "docs/slack.md shows old blocks"


async def test_a_first_of_two_approvals_shows_on_the_message_and_the_second_approver_gets_buttons(app, fake_slack):
    _session, _call, ticket_id = await ask(app, "Please reimburse $6,000 for the conference sponsorship")
    await fake_slack.arrived("/hook")
    first = await from_slack(app, click(BOB, "approve", ticket_id, fake_slack.url("/response/1")))
    await work_done()

    [update] = await fake_slack.arrived("/response/1")
    [_requested, first_approval] = await fake_slack.arrived("/hook", 2)
    assert first.status_code == 200
    assert outcome(update) == "1 of 2: needs 1 more approver; approved by bob" and buttons(update) == []
    # The channel's new message for the first approval carries the buttons for a second approver.
    assert first_approval["type"] == "ticket.first_approval"
    assert first_approval["text"].endswith("from alice): 1 of 2: needs 1 more approver.")
    fields = [f["text"] for b in first_approval["blocks"] for f in b.get("fields", [])]
    assert "*Approvals*\n1 of 2: needs 1 more approver" in fields
    assert buttons({"blocks": first_approval["blocks"]}) == ["approve", "reject", "approve_less"]
    assert await ledger_says(ticket_id) == (TicketStatus.PENDING, [])
    # The decision's evidence: through Slack, as the user and workspace Slack's signed request named.
    [decision] = (await current().ledger.evidence(ticket_id))["decisions"]
    assert (decision["channel"], decision["principal"]) == (
        "slack", {"slack_user": BOB, "slack_team": "T0TEAM", "approver": "bob"})


async def test_after_a_first_approval_for_less_the_messages_show_the_amount_it_approved(app, fake_slack):
    _session, _call, ticket_id = await ask(app, "Please reimburse $6,000 for the conference sponsorship")
    await fake_slack.arrived("/hook")
    await from_slack(app, submission(BOB, form("approve_less", ticket_id, fake_slack.url("/response/1")),
                                     amount="5500", reason="the sponsorship cap"))
    await work_done()
    [update] = await fake_slack.arrived("/response/1")
    [_requested, first_approval] = await fake_slack.arrived("/hook", 2)
    await from_slack(app, click(CAROL, "approve_less", ticket_id, fake_slack.url("/response/2"), "trigger-2"))
    await work_done()
    [opened] = await fake_slack.arrived("/api/views.open")

    assert outcome(update) == "1 of 2: needs 1 more approver; approved by bob, $5,500.00 of the $6,000.00 asked"
    # The second approver's message: what Approve pays now, in the field, the confirmation and the form.
    fields = [f["text"] for b in first_approval["blocks"] for f in b.get("fields", [])]
    assert "*Amount*\n$5,500.00 of the $6,000.00 asked" in fields
    [approve] = [e for b in first_approval["blocks"] if b["type"] == "actions" for e in b["elements"]
                 if e["action_id"] == "approve"]
    assert "$5,500.00 of the $6,000.00 asked" in approve["confirm"]["text"]["text"]
    [amount] = [b for b in opened["view"]["blocks"] if b.get("block_id") == "amount"]
    assert amount["label"]["text"] == "Amount to pay (at most $5,500.00)"
    assert await ledger_says(ticket_id) == (TicketStatus.PENDING, [])


# --- a click, verified and decided once --------------------------------------------------------


async def test_approve_in_slack_pays_once_and_replaces_the_message(app, fake_slack):
    session_id, call_id, ticket_id = await ask(app)
    response_url = fake_slack.url("/response/bob")

    answer = await from_slack(app, click(BOB, "approve", ticket_id, response_url))
    await work_done()

    assert answer.status_code == 200 and answer.content == b""
    status, payouts = await ledger_says(ticket_id)
    [(payout_id, cents)] = payouts
    assert (status, cents) == (TicketStatus.APPROVED, 25_000)
    assert await conversation_says(app, session_id, call_id) == (["approved"], [(payout_id, 250.0)])
    [update] = await fake_slack.arrived("/response/bob")
    assert update["replace_original"] is True and buttons(update) == []
    assert outcome(update) == f"Approved by bob · paid $250.00 · {payout_id}"
    assert _same_shape(update, shown_in_docs("updated")), "docs/slack.md shows an old update"
    await all_sent(ticket_id)
    ticket = (await app.get(f"/api/approvals/{ticket_id}", headers=as_approver("carol"))).json()
    assert ("slack.update", "sent") in [(n["event"], n["state"]) for n in ticket["notifications"]]


@pytest.mark.parametrize("forgery", ["unsigned", "badly signed", "old", "from the future", "replayed"])
async def test_a_request_that_is_not_slacks_or_not_new_is_refused_and_decides_nothing(db_url, desk, app, fake_slack,
                                                                                    forgery):
    session_id, call_id, ticket_id = await ask(app)
    payload = click(BOB, "approve", ticket_id, fake_slack.url("/response/x"))
    now = desk.ledger.now().timestamp()
    body, headers = signed(payload, at=now)
    expected = (401, "invalid_signature")
    if forgery == "unsigned":
        headers = {"Content-Type": headers["Content-Type"]}
        expected = (401, "unsigned_request")
    elif forgery == "badly signed":
        body, headers = signed(payload, at=now, secret="not-the-signing-secret-of-this-app")
    elif forgery in ("old", "from the future"):
        # A minute past Slack's five: the test's own time (a busy machine's seconds) cannot bring it back in.
        body, headers = signed(payload, at=now - 360 if forgery == "old" else now + 360)
        expected = (401, "stale_request")
    elif forgery == "replayed":
        first = await app.post("/slack/actions", content=body, headers=headers)
        assert first.status_code == 200
        await work_done()
        expected = (409, "replayed_request")

    refused = await app.post("/slack/actions", content=body, headers=headers)
    await work_done()
    await all_sent(ticket_id)

    assert refused.status_code == expected[0], refused.text
    assert refused.json()["error"] == expected[1] and refused.json()["message"] and refused.json()["fix"]
    status, payouts = await ledger_says(ticket_id)
    if forgery == "replayed":  # the first one counted, once
        assert status is TicketStatus.APPROVED and len(payouts) == 1
        assert len(fake_slack.at("/response/x")) == 1
    else:
        assert (status, payouts) == (TicketStatus.PENDING, [])
        assert await conversation_says(app, session_id, call_id) == ([], [])
        assert fake_slack.at("/response/x") == []


NOT_SLACKS = {
    "loopback": "http://127.0.0.1:{port}/response/x", "look-alike host": "https://hooks.slack.com.evil.example/actions/1",
    "user info": "https://hooks.slack.com@evil.example/actions/1", "plain http": "http://hooks.slack.com/actions/1",
    "not a url": "not a url",
}


async def test_a_signed_request_whose_response_url_is_not_slacks_is_refused_and_nothing_goes_there(
        fake_slack, configure):
    configure(**slack_settings(fake_slack, slack_response_url_hosts=SLACK_HOSTS))  # the default: Slack's hosts
    port = fake_slack.url("").rsplit(":", 1)[1]
    async with in_process() as app:
        _session, _call, ticket_id = await ask(app)
        answers = {}
        for (name, response_url), kind in itertools.product(NOT_SLACKS.items(), ("click", "form")):
            response_url = response_url.format(port=port)
            payload = (click(BOB, "approve", ticket_id, response_url) if kind == "click" else
                       submission(CAROL, form("reject", ticket_id, response_url), reason="not a business expense"))
            refused = await from_slack(app, payload)
            await work_done()
            answers[name, kind] = (refused.status_code, refused.json().get("error"),
                                   "SLACK_RESPONSE_URL_HOSTS" in refused.json().get("fix", ""),
                                   await ledger_says(ticket_id))

        assert answers == dict.fromkeys(answers, (400, "response_url_not_allowed", True, (TicketStatus.PENDING, [])))
        assert len(answers) == 2 * len(NOT_SLACKS)
        assert [n.event for n in await current().ledger.outbox.of_ticket(ticket_id)] == ["ticket.requested"]
        assert [p.path for p in fake_slack.posted] == ["/hook"]


@pytest.mark.parametrize("url, hosts, followed", [
    ("https://hooks.slack.com/actions/T0TEAM/1/abc", SLACK_HOSTS, True),
    ("https://hooks.slack-gov.com/actions/T0TEAM/1/abc", SLACK_HOSTS, True),
    ("https://HOOKS.slack.com:443/actions/T0TEAM/1/abc", SLACK_HOSTS, True),
    ("https://proxy.example/actions/1", ("proxy.example",), True),
    ("http://127.0.0.1:9000/response/1", ("127.0.0.1",), True),
    ("http://[::1]:9000/response/1", ("::1",), True),
    ("http://127.0.0.1:9000/response/1", SLACK_HOSTS, False),
    ("http://proxy.example/actions/1", ("proxy.example",), False),  # plain http only to a loopback host
    ("https://hooks.slack.com./actions/1", SLACK_HOSTS, False),
    ("https://evil.example/?u=https://hooks.slack.com/", SLACK_HOSTS, False),
    ("https://hooks.slack.com\\@evil.example/", SLACK_HOSTS, False),
    ("https://hooks.slack.com:99999/actions/1", SLACK_HOSTS, False),
    ("/actions/1", SLACK_HOSTS, False),
])
def test_a_response_url_is_followed_only_to_the_hosts_listed_over_https_or_to_loopback(url, hosts, followed):
    assert (refused_response_url(url, hosts) is None) is followed


DEEP = "[" * 5000 + "]" * 5000


WRONG_SHAPES: dict[str, dict[str, Any] | str] = {
    "5,000 deep": '{"type": "block_actions", "user": {"id": "UBOB0001"}, "actions": ' + DEEP + "}",
    "actions a string": {"actions": "approve"},
    "actions [1]": {"actions": [1]},
    "no action": {"actions": []},
    "action_id a number": {"actions": [{"action_id": 7, "value": "T-1"}]},
    "user a string": {"user": "UBOB0001"},
    "no user": {"user": None},
    "team a string": {"team": "T0TEAM"},
    "response_url a list": {"response_url": ["http://127.0.0.1/"]},
    "type a number": {"type": 5},
    "state.values a list": {"type": "view_submission", "view": {"state": {"values": []}}},
    "a form's input a string": {"type": "view_submission", "view": {"state": {"values": {"reason": {"reason": "no"}}}}},
    "a form without its view": {"type": "view_submission"},
    "an array": "[]",
}


async def test_a_signed_payload_of_the_wrong_shape_is_a_400_that_says_so(app, fake_slack):
    _session, _call, ticket_id = await ask(app)
    answers = {}
    for shape, payload in WRONG_SHAPES.items():
        if isinstance(payload, dict):  # a click with this changed (None removes the field), a form this app opened
            changed = click(BOB, "approve", ticket_id, fake_slack.url("/response/x")) | payload
            if isinstance(changed.get("view"), dict):
                changed["view"] = changed["view"] | form("reject", ticket_id, fake_slack.url("/response/x"))
            payload = {k: v for k, v in changed.items() if v is not None}

        refused = await from_slack(app, payload)
        await work_done()
        said = refused.json()
        answers[shape] = (refused.status_code, said.get("error"), bool(said.get("message") and said.get("fix")),
                          await ledger_says(ticket_id))

    assert answers == dict.fromkeys(WRONG_SHAPES, (400, "invalid_payload", True, (TicketStatus.PENDING, [])))
    assert fake_slack.at("/response/x") == []


async def test_with_slack_team_id_a_click_or_a_form_from_another_workspace_is_refused_like_a_strangers(
        fake_slack, configure):
    configure(**slack_settings(fake_slack, slack_team_id="T0TEAM"))
    async with in_process() as app:
        _session, _call, ticket_id = await ask(app)
        elsewhere = {"team": {"id": "T0OTHER"}}
        clicked = await from_slack(app, click(BOB, "approve", ticket_id, fake_slack.url("/response/o")) | elsewhere)
        await work_done()
        submitted = await from_slack(app, submission(CAROL, form("reject", ticket_id, fake_slack.url("/response/o")),
                                                     reason="not a business expense") | elsewhere)
        await work_done()
        [reply] = await fake_slack.arrived("/response/o")
        assert await ledger_says(ticket_id) == (TicketStatus.PENDING, [])

        at_home = await from_slack(app, click(BOB, "approve", ticket_id, fake_slack.url("/response/h")))
        await work_done()

    assert clicked.status_code == 200 and reply["response_type"] == "ephemeral"
    assert "T0OTHER" in reply["text"] and "SLACK_TEAM_ID" in reply["text"]
    assert "T0OTHER" in submitted.json()["errors"]["reason"]  # the form stays open, saying why
    assert at_home.status_code == 200 and (await ledger_says(ticket_id))[0] is TicketStatus.APPROVED


async def test_slacks_url_is_served_in_production_mode_only_with_slack_approvals_on(fake_slack, configure):
    desk = configure(**slack_settings(fake_slack, production=True, trusted_user_header="X-Forwarded-User"))
    async with in_process() as app:
        body, headers = signed({"type": "block_actions"}, at=desk.ledger.now().timestamp(),
                               secret="not-the-signing-secret-of-this-app")
        refused = await app.post("/slack/actions", content=body, headers=headers)
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_signature"

    configure(slack_signing_secret=None)  # Slack approvals off: nothing is served there
    async with in_process() as app:
        closed = await app.post("/slack/actions", content=body, headers=headers)
    assert closed.status_code == 404 and closed.json()["error"] == "not_served"


async def test_an_unknown_slack_user_gets_a_reply_only_they_see_and_decides_nothing(app, fake_slack):
    session_id, call_id, ticket_id = await ask(app)

    answer = await from_slack(app, click(STRANGER, "approve", ticket_id, fake_slack.url("/response/m")))
    await work_done()

    assert answer.status_code == 200
    [reply] = await fake_slack.arrived("/response/m")
    assert (reply["response_type"], reply["replace_original"]) == ("ephemeral", False)
    assert STRANGER in reply["text"] and "SLACK_APPROVERS" in reply["text"]
    assert await ledger_says(ticket_id) == (TicketStatus.PENDING, [])
    assert await conversation_says(app, session_id, call_id) == ([], [])


async def test_the_requester_clicking_approve_is_refused_by_the_ledger(app, fake_slack):
    session_id, call_id, ticket_id = await ask(app)

    await from_slack(app, click(ALICE, "approve", ticket_id, fake_slack.url("/response/a")))
    await work_done()

    replies = await fake_slack.arrived("/response/a", 2)
    [refusal] = [r for r in replies if r.get("response_type") == "ephemeral"]
    [update] = [r for r in replies if r.get("replace_original")]
    assert f"alice requested ticket {ticket_id} and cannot approve or reject it" in refusal["text"]
    # The message shows the ticket as it stands: still waiting, buttons still there.
    assert outcome(update) is None and buttons(update) == ["approve", "reject", "approve_less"]
    assert await ledger_says(ticket_id) == (TicketStatus.PENDING, [])
    assert await conversation_says(app, session_id, call_id) == ([], [])
    audit = (await app.get(f"/api/approvals/{ticket_id}", headers=as_approver("bob"))).json()["audit"]
    assert [e["action"] for e in audit] == ["requested"]


@pytest.mark.parametrize("text, approvals", [(LUNCH, 1), ("Please reimburse $6,000 for the conference sponsorship", 2)],
                         ids=["one approver", "two-person rule"])
async def test_two_approvers_clicking_at_once_decide_once_and_pay_once(db_url, desk, app, fake_slack, text,
                                                                       approvals):
    session_id, call_id, ticket_id = await ask(app, text)

    answers = await asyncio.gather(
        from_slack(app, click(BOB, "approve", ticket_id, fake_slack.url("/response/bob"), "trigger-bob")),
        from_slack(app, click(CAROL, "approve", ticket_id, fake_slack.url("/response/carol"), "trigger-carol")))
    await work_done()

    assert [a.status_code for a in answers] == [200, 200]
    await all_sent(ticket_id)
    status, payouts = await ledger_says(ticket_id)
    [(payout_id, _cents)] = payouts
    assert status is TicketStatus.APPROVED
    decisions, paid = await conversation_says(app, session_id, call_id)
    assert decisions == ["approved"] and [p for p, _ in paid] == [payout_id]
    updates = [m for who in ("bob", "carol") for m in fake_slack.at(f"/response/{who}") if m.get("replace_original")]
    approvers = (await desk.ledger.tickets.get(ticket_id)).approvers
    assert len(approvers) == approvals and set(approvers) <= {"bob", "carol"}
    # Both clicks end in the message showing the one outcome, as the ledger has it.
    assert len(updates) == 2 and {outcome(m) for m in updates} == {
        f"Approved by {' and '.join(approvers)} · paid {'$6,000.00' if approvals == 2 else '$250.00'} · {payout_id}"}
    refusals = [m for who in ("bob", "carol") for m in fake_slack.at(f"/response/{who}")
                if m.get("response_type") == "ephemeral"]
    assert len(refusals) == (0 if approvals == 2 else 1)


async def test_the_same_approver_twice_on_the_two_person_rule_is_one_approval(app, fake_slack):
    _session, _call, ticket_id = await ask(app, "Please reimburse $6,000 for the conference sponsorship")
    await from_slack(app, click(BOB, "approve", ticket_id, fake_slack.url("/response/1"), "t1"))
    await work_done()
    await from_slack(app, click(BOB, "approve", ticket_id, fake_slack.url("/response/2"), "t2"))
    await work_done()
    await all_sent(ticket_id)

    [refusal] = [m for m in fake_slack.at("/response/2") if m.get("response_type") == "ephemeral"]
    assert f"bob already approved ticket {ticket_id}" in refusal["text"]
    assert "no approver counts twice" in refusal["text"]
    assert await ledger_says(ticket_id) == (TicketStatus.PENDING, [])


# --- words: Reject and Approve less ---------------------------------------------------------


async def test_approve_less_through_the_form_pays_the_lower_amount(app, fake_slack):
    session_id, call_id, ticket_id = await ask(app)
    response_url = fake_slack.url("/response/less")

    await from_slack(app, click(BOB, "approve_less", ticket_id, response_url, "trigger-less"))
    await work_done()
    [opened] = await fake_slack.arrived("/api/views.open")
    [call] = [p for p in fake_slack.posted if p.path == "/api/views.open"]
    assert call.headers["Authorization"] == f"Bearer {BOT_TOKEN}"  # slack_sdk's WebClient, at SLACK_API_URL
    assert opened["trigger_id"] == "trigger-less" and opened["view"]["callback_id"] == "approve_less"
    assert json.loads(opened["view"]["private_metadata"]) == {"ticket": ticket_id, "response_url": response_url}
    assert await ledger_says(ticket_id) == (TicketStatus.PENDING, [])  # a form opened; nothing decided

    too_much = await from_slack(app, submission(BOB, opened["view"], amount="300", reason="over the per diem"))
    assert too_much.status_code == 200 and set(too_much.json()["errors"]) == {"amount"}  # shown in the form
    assert await ledger_says(ticket_id) == (TicketStatus.PENDING, [])

    submitted = await from_slack(app, submission(BOB, opened["view"], amount="200", reason="over the per diem"))
    await work_done()

    assert submitted.status_code == 200 and submitted.content == b""  # the form closes
    status, [(payout_id, cents)] = await ledger_says(ticket_id)
    assert (status, cents) == (TicketStatus.APPROVED, 20_000)
    assert await conversation_says(app, session_id, call_id) == (["approved"], [(payout_id, 200.0)])
    [update] = await fake_slack.arrived("/response/less")
    assert outcome(update) == f"Approved by bob · paid $200.00 of the $250.00 asked · {payout_id}"


async def test_reject_through_the_form_needs_a_reason_and_tells_the_conversation(app, fake_slack):
    session_id, call_id, ticket_id = await ask(app)
    await from_slack(app, click(CAROL, "reject", ticket_id, fake_slack.url("/response/no"), "trigger-no"))
    await work_done()
    [opened] = await fake_slack.arrived("/api/views.open")

    blank = await from_slack(app, submission(CAROL, opened["view"], reason="  "))
    assert set(blank.json()["errors"]) == {"reason"}
    stranger = await from_slack(app, submission(STRANGER, opened["view"], reason="not a business expense"))
    assert STRANGER in stranger.json()["errors"]["reason"]  # a form passed on decides nothing either
    assert await ledger_says(ticket_id) == (TicketStatus.PENDING, [])
    await from_slack(app, submission(CAROL, opened["view"], reason="not a business expense"))
    await work_done()

    assert await ledger_says(ticket_id) == (TicketStatus.REJECTED, [])
    assert await conversation_says(app, session_id, call_id) == (["rejected"], [])
    [update] = await fake_slack.arrived("/response/no")
    assert outcome(update) == "Rejected by carol: not a business expense" and buttons(update) == []


@pytest.mark.parametrize("kind, amount, reason, block", [
    ("approve_less", "5800", "over the cap", "amount"),  # more than bob's $5,500, what the ticket pays now
    ("approve_less", "lots", "over the cap", "amount"),
    ("approve_less", "5000", "x" * 501, "reason"),
    ("reject", None, "x" * 501, "reason"),
    ("reject", None, "not\u200bvisible", "reason"),
], ids=["over what the ticket pays", "not a number", "approve less, reason too long", "reject, reason too long",
        "an invisible character"])
async def test_a_form_whose_amount_or_reason_is_refused_stays_open_saying_why(app, fake_slack, kind, amount, reason,
                                                                            block):
    _session, _call, ticket_id = await ask(app, "Please reimburse $6,000 for the conference sponsorship")
    await current().ledger.tickets.decide(ticket_id, approver="bob", approve=True, amount="5500", reason="the cap")

    answer = await from_slack(app, submission(CAROL, form(kind, ticket_id, fake_slack.url("/response/c")),
                                              amount=amount, reason=reason))
    await work_done()

    assert answer.status_code == 200
    assert answer.json()["response_action"] == "errors" and list(answer.json()["errors"]) == [block]
    ticket = await current().ledger.tickets.get(ticket_id)
    assert (ticket.status, ticket.approvers, ticket.payable_cents) == (TicketStatus.PENDING, ["bob"], 550_000)
    assert fake_slack.at("/response/c") == []


async def test_a_form_slack_cannot_open_is_said_to_the_person_who_clicked(app, fake_slack):
    fake_slack.views_error = "expired_trigger_id"
    _session, _call, ticket_id = await ask(app)

    await from_slack(app, click(CAROL, "reject", ticket_id, fake_slack.url("/response/no")))
    await work_done()

    [reply] = await fake_slack.arrived("/response/no")
    assert reply["response_type"] == "ephemeral" and "expired_trigger_id" in reply["text"]
    assert f"{INBOX}#{ticket_id}" in reply["text"]
    assert await ledger_says(ticket_id) == (TicketStatus.PENDING, [])


async def test_without_a_bot_token_reject_and_approve_less_link_to_the_ticket_on_the_inbox_page(
        fake_slack, configure):
    configure(**slack_settings(fake_slack, slack_bot_token=None))
    async with in_process() as app:
        _session, _call, ticket_id = await ask(app)
        [message] = await fake_slack.arrived("/hook")
        [actions] = [b for b in message["blocks"] if b["type"] == "actions"]
        links = {e["action_id"]: e.get("url") for e in actions["elements"]}
        clicked = await from_slack(app, click(BOB, "reject_in_inbox", ticket_id, fake_slack.url("/response/r")))
        await work_done()

    assert links == {"approve": None, "reject_in_inbox": f"{INBOX}#{ticket_id}",
                     "approve_less_in_inbox": f"{INBOX}#{ticket_id}"}
    assert clicked.status_code == 200  # Slack reports a link's click too; the browser does the rest
    assert fake_slack.at("/response/r") == [] and fake_slack.at("/api/views.open") == []
    assert await ledger_says(ticket_id) == (TicketStatus.PENDING, [])


# --- the message keeps up ------------------------------------------------------------------


@pytest.mark.parametrize("elsewhere", ["rejected", "withdrawn", "expired"])
async def test_a_click_on_a_ticket_decided_elsewhere_updates_the_message_to_its_state(
        clock, app, fake_slack, elsewhere):
    session_id, call_id, ticket_id = await ask(app)
    if elsewhere == "rejected":
        rejected = await app.post(f"/api/approvals/{ticket_id}/reject", headers=as_approver("carol"),
                                  json={"reason": "not a business expense"})
        assert rejected.status_code == 200, rejected.text
    elif elsewhere == "withdrawn":
        await app.post("/run", json=run_body("alice", session_id, user_text("Please cancel my request")))
    else:
        clock.advance(hours=73)
    expected = {"rejected": "Rejected by carol: not a business expense", "withdrawn": "Withdrawn",
                "expired": "Expired"}[elsewhere]

    await from_slack(app, click(BOB, "approve", ticket_id, fake_slack.url("/response/late")))
    await work_done()

    [update] = [m for m in await fake_slack.arrived("/response/late", 2) if m.get("replace_original")]
    assert outcome(update) == expected and buttons(update) == []
    status, payouts = await ledger_says(ticket_id)
    assert status.value == elsewhere and payouts == []
    decisions, paid = await conversation_says(app, session_id, call_id)
    assert decisions == [status.value] and paid == []


async def test_an_approval_whose_conversation_is_gone_is_said_and_the_message_waits_for_the_settlement(
        desk, clock, app, fake_slack):
    session_id, _call, ticket_id = await ask(app)
    # Deleted behind the app's back and started again empty: the decision has nothing to answer.
    store = session_service(desk.settings.database_url)
    await store.delete_session(app_name="long_running_agent", user_id="alice", session_id=session_id)
    await store.create_session(app_name="long_running_agent", user_id="alice", session_id=session_id)
    await store.db_engine.dispose()

    await from_slack(app, click(BOB, "approve", ticket_id, fake_slack.url("/response/gone")))
    await work_done()
    [said] = await fake_slack.arrived("/response/gone")
    assert said["response_type"] == "ephemeral" and "Settle on the inbox page" in said["text"]
    assert (await _slack_update(ticket_id, attempts=0)).state == "waiting"  # not "not paid yet": not yet

    settled = await app.post(f"/api/approvals/{ticket_id}/settle", headers=as_approver("carol"))
    assert settled.status_code == 200, settled.text
    clock.advance(seconds=5)
    await send_due(desk.ledger, desk.settings)

    [_said, update] = await fake_slack.arrived("/response/gone", 2)
    [(payout_id, cents)] = (await ledger_says(ticket_id))[1]
    assert cents == 25_000 and outcome(update) == f"Approved by bob · paid $250.00 · {payout_id}"


async def test_a_response_url_that_fails_then_recovers_gets_the_outcome(desk, clock, app, fake_slack):
    fake_slack.fail_responses = 2
    _session, _call, ticket_id = await ask(app)

    await from_slack(app, click(BOB, "approve", ticket_id, fake_slack.url("/response/flaky")))
    await work_done()
    update = await _slack_update(ticket_id)
    assert (update.state, update.attempts) == ("retrying", 1)

    for tried in (2, 3):  # the backoff, on the test's clock: 5 s, then 30 s
        clock.advance(seconds=(update.next_attempt_at - clock.now).total_seconds())
        await send_due(desk.ledger, desk.settings)  # or the server's sender, whichever claims it
        update = await _slack_update(ticket_id, attempts=tried)

    attempts = await fake_slack.arrived("/response/flaky", 3)
    assert update.state == "sent" and len(attempts) == 3
    [(payout_id, _cents)] = (await ledger_says(ticket_id))[1]
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

    update = await _slack_update(ticket.id, attempts=0)
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


async def _slack_update(ticket_id: str, attempts: int = 1, timeout: float = 30):
    """The ticket's slack.update row, once `attempts` POSTs of it are over (the last one sent, or failed)."""
    deadline = time.monotonic() + timeout
    while True:
        [update] = [n for n in await current().ledger.outbox.of_ticket(ticket_id) if n.event == "slack.update"]
        tried = update.attempts + (update.state == "sent")
        if tried >= attempts or time.monotonic() > deadline:
            return update
        await asyncio.sleep(0.05)


async def test_a_click_answered_by_a_server_that_died_before_deciding_is_decided_by_the_next_sweep(
        desk, clock, app, fake_slack, monkeypatch):
    session_id, call_id, ticket_id = await ask(app)
    # The server answers Slack, then dies before its background work starts: none of it runs.
    monkeypatch.setattr(desk, "in_background", lambda work: work.close())
    answer = await from_slack(app, click(BOB, "approve", ticket_id, fake_slack.url("/response/lost")))
    monkeypatch.undo()
    assert answer.status_code == 200 and await ledger_says(ticket_id) == (TicketStatus.PENDING, [])

    clock.advance(seconds=31)  # the message's update is due: it shows the ticket as it stands, still waiting
    await send_due(desk.ledger, desk.settings)
    [waiting] = await fake_slack.arrived("/response/lost")
    assert outcome(waiting) is None and buttons(waiting) == ["approve", "reject", "approve_less"]

    clock.advance(minutes=2)
    sweep = SlackActions(desk, decide=Courier(desk).decide, send=send_due)
    assert await sweep.decide_left_over() == 1 and await sweep.decide_left_over() == 0  # the sweep's work, once
    await work_done()

    status, [(payout_id, cents)] = await ledger_says(ticket_id)
    assert (status, cents) == (TicketStatus.APPROVED, 25_000)
    assert await conversation_says(app, session_id, call_id) == (["approved"], [(payout_id, 250.0)])
    [_waiting, update] = await fake_slack.arrived("/response/lost", 2)
    assert outcome(update) == f"Approved by bob · paid $250.00 · {payout_id}"
    audit = (await app.get(f"/api/approvals/{ticket_id}", headers=as_approver("carol"))).json()["audit"]
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


# --- settings, and the app without slack_sdk ------------------------------------------------


@pytest.mark.parametrize("env, says", [
    ({"SLACK_APPROVERS": "UBOB0001:bob"}, "SLACK_APPROVERS is set but SLACK_SIGNING_SECRET is not"),
    ({"SLACK_SIGNING_SECRET": SIGNING_SECRET}, "APPROVAL_WEBHOOK_URL must be the Slack incoming webhook"),
    ({"SLACK_SIGNING_SECRET": SIGNING_SECRET, "APPROVAL_WEBHOOK_URL": "https://hooks.slack.com/services/x",
      "APPROVAL_WEBHOOK_SECRET": SECRET}, "SLACK_APPROVERS must say which Slack users"),
    ({"SLACK_APPROVERS": "bob", "SLACK_SIGNING_SECRET": SIGNING_SECRET}, "must look like SlackUserId:name"),
    ({"SLACK_SIGNING_SECRET": SIGNING_SECRET, "APPROVAL_WEBHOOK_URL": "https://hooks.slack.com/services/x",
      "APPROVAL_WEBHOOK_SECRET": SECRET, "SLACK_APPROVERS": "UBOB0001:bob,UDAVE0001:dave", "SLACK_INBOX_URL": INBOX},
     "SLACK_APPROVERS names dave, who is not in APPROVERS"),
    ({"SLACK_SIGNING_SECRET": SIGNING_SECRET, "APPROVAL_WEBHOOK_URL": "https://hooks.slack.com/services/x",
      "APPROVAL_WEBHOOK_SECRET": SECRET, "SLACK_APPROVERS": "UBOB0001:bob"}, "set SLACK_INBOX_URL"),
    ({"SLACK_BOT_TOKEN": "xoxp-a-user-token"}, "SLACK_BOT_TOKEN: must be the app's bot token"),
    ({"SLACK_TEAM_ID": "T0TEAM"}, "SLACK_TEAM_ID is set but SLACK_SIGNING_SECRET is not"),
    ({"SLACK_RESPONSE_URL_HOSTS": "https://hooks.slack.com/"}, "SLACK_RESPONSE_URL_HOSTS: must be host names"),
])
def test_slack_settings_are_checked_at_start_with_what_to_set(monkeypatch, env, says):
    monkeypatch.setenv("APPROVERS", "bob:bob-token,carol:carol-token")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=re.escape(says)):
        load_settings()


@pytest.mark.subprocess
def test_the_server_refuses_to_start_with_a_slack_user_mapped_to_no_approver(tmp_path):
    env = os.environ | {
        "EXPENSES_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/x.db", "APPROVERS": "bob:bob-token,carol:carol-tok",
        "APPROVAL_WEBHOOK_URL": "https://hooks.slack.com/services/x", "APPROVAL_WEBHOOK_SECRET": SECRET,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_APPROVERS": "UDAVE0001:dave", "SLACK_BOT_TOKEN": BOT_TOKEN,
    }
    started = subprocess.run([sys.executable, "-m", "long_running_agent.web", "--port", "9"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=60)
    assert started.returncode != 0 and "Traceback" not in started.stderr
    [line] = started.stderr.strip().splitlines()
    assert line == shown_in_docs("refused at start", "text").strip()


@pytest.mark.subprocess
def test_the_app_without_slack_settings_never_imports_slack_sdk():
    probe = ("import sys; from long_running_agent.web import create_server; from long_running_agent.agent import "
             "build_app; from long_running_agent.desk import Desk; from long_running_agent.settings import "
             "load_settings; create_server(Desk(load_settings(), app=build_app)); "
             "import long_running_agent.notifications, long_running_agent.slack.messages; "
             "print('slack_sdk' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={k: v for k, v in os.environ.items() if not k.startswith("SLACK_")})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"


# --- the docs show the real messages ---------------------------------------------------------


def shown_in_docs(name: str, kind: str = "json") -> Any:
    """A block of docs/slack.md marked `<!-- slack: name -->`: JSON, read; text, as is."""
    [block] = re.findall(rf"<!-- slack: {name} -->\n```{kind}\n(.*?)```", DOCS.read_text(), re.S)
    return json.loads(block) if kind == "json" else block


def _same_shape(real: Any, shown: Any) -> bool:
    """Equal once ids, times and amounts that change from run to run are masked."""
    return _masked(json.dumps(real, sort_keys=True)) == _masked(json.dumps(shown, sort_keys=True))


def _masked(text: str) -> str:
    text = re.sub(r"([TPN])-[0-9a-f]{12}\b", r"\1-…", text)
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d", "YYYY-MM-DD hh:mm", text)
