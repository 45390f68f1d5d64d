"""Which requests from Slack count: signed by Slack, new, from its workspace, of the right shape, answering
to Slack's own URLs; the rest are refused, say why and decide nothing. Slack's settings are checked at start.

Requests are signed with slack_sdk's own SignatureVerifier (tests/support/fake_slack.py); `make web`'s server
runs in-process on the test's desk (tests/support/slack_approvals.py).
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from typing import Any

import pytest
from support.fake_slack import BOB, BOT_TOKEN, CAROL, SIGNING_SECRET, STRANGER, click, signed, submission
from support.processes import ROOT
from support.receiver import SECRET
from support.servers import in_process
from support.slack_approvals import (
    INBOX,
    all_sent,
    ask,
    conversation_says,
    form,
    from_slack,
    ledger_says,
    slack_settings,
    work_done,
)
from support.slack_docs import shown_in_docs

from long_running_agent.ledger import TicketStatus
from long_running_agent.outbound import refused_url
from long_running_agent.settings import SLACK_HOSTS, load_settings

# --- a request from Slack, checked before it decides anything ---------------------------------


@pytest.mark.parametrize("forgery", ["unsigned", "badly signed", "old", "from the future", "replayed"])
async def test_a_request_that_is_not_slacks_or_not_new_is_refused_and_decides_nothing(
        db_url, desk, slack_app, fake_slack, forgery):
    session_id, call_id, ticket_id = await ask(slack_app)
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
        first = await slack_app.post("/slack/actions", content=body, headers=headers)
        assert first.status_code == 200
        await work_done(desk)
        expected = (409, "replayed_request")

    refused = await slack_app.post("/slack/actions", content=body, headers=headers)
    await work_done(desk)
    await all_sent(desk, ticket_id)

    assert refused.status_code == expected[0], refused.text
    assert refused.json()["error"] == expected[1] and refused.json()["message"] and refused.json()["fix"]
    status, payouts = await ledger_says(desk, ticket_id)
    if forgery == "replayed":  # the first one counted, once
        assert status is TicketStatus.APPROVED and len(payouts) == 1
        assert len(fake_slack.at("/response/x")) == 1
    else:
        assert (status, payouts) == (TicketStatus.PENDING, [])
        assert await conversation_says(slack_app, session_id, call_id) == ([], [])
        assert fake_slack.at("/response/x") == []


NOT_SLACKS = {
    "loopback": "http://127.0.0.1:{port}/response/x", "look-alike host": "https://hooks.slack.com.evil.example/actions/1",
    "user info": "https://hooks.slack.com@evil.example/actions/1", "plain http": "http://hooks.slack.com/actions/1",
    "not a url": "not a url",
}


async def test_a_signed_request_whose_response_url_is_not_slacks_is_refused_and_nothing_goes_there(
        desk, fake_slack, configure):
    configure(**slack_settings(fake_slack, slack_response_url_hosts=SLACK_HOSTS))  # the default: Slack's hosts
    port = fake_slack.url("").rsplit(":", 1)[1]
    async with in_process(desk) as app:
        _session, _call, ticket_id = await ask(app)
        answers = {}
        for (name, response_url), kind in itertools.product(NOT_SLACKS.items(), ("click", "form")):
            response_url = response_url.format(port=port)
            payload = (click(BOB, "approve", ticket_id, response_url) if kind == "click" else
                       submission(CAROL, form("reject", ticket_id, response_url), reason="not a business expense"))
            refused = await from_slack(desk, app, payload)
            await work_done(desk)
            answers[name, kind] = (refused.status_code, refused.json().get("error"),
                                   "SLACK_RESPONSE_URL_HOSTS" in refused.json().get("fix", ""),
                                   await ledger_says(desk, ticket_id))

        assert answers == dict.fromkeys(answers, (400, "response_url_not_allowed", True, (TicketStatus.PENDING, [])))
        assert len(answers) == 2 * len(NOT_SLACKS)
        assert [n.event for n in await desk.ledger.outbox.of_ticket(ticket_id)] == ["ticket.requested"]
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
    assert (refused_url(url, hosts, "SLACK_RESPONSE_URL_HOSTS") is None) is followed


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


async def test_a_signed_payload_of_the_wrong_shape_is_a_400_that_says_so(desk, slack_app, fake_slack):
    _session, _call, ticket_id = await ask(slack_app)
    answers = {}
    for shape, payload in WRONG_SHAPES.items():
        if isinstance(payload, dict):  # a click with this changed (None removes the field), a form this app opened
            changed = click(BOB, "approve", ticket_id, fake_slack.url("/response/x")) | payload
            if isinstance(changed.get("view"), dict):
                changed["view"] = changed["view"] | form("reject", ticket_id, fake_slack.url("/response/x"))
            payload = {k: v for k, v in changed.items() if v is not None}

        refused = await from_slack(desk, slack_app, payload)
        await work_done(desk)
        said = refused.json()
        answers[shape] = (refused.status_code, said.get("error"), bool(said.get("message") and said.get("fix")),
                          await ledger_says(desk, ticket_id))

    assert answers == dict.fromkeys(WRONG_SHAPES, (400, "invalid_payload", True, (TicketStatus.PENDING, [])))
    assert fake_slack.at("/response/x") == []


async def test_with_slack_team_id_a_click_or_a_form_from_another_workspace_is_refused_like_a_strangers(
        desk, fake_slack, configure):
    configure(**slack_settings(fake_slack, slack_team_id="T0TEAM"))
    async with in_process(desk) as app:
        _session, _call, ticket_id = await ask(app)
        elsewhere = {"team": {"id": "T0OTHER"}}
        response_url = fake_slack.url("/response/o")
        clicked = await from_slack(desk, app, click(BOB, "approve", ticket_id, response_url) | elsewhere)
        await work_done(desk)
        submitted = await from_slack(desk, app, submission(CAROL, form("reject", ticket_id, response_url),
                                                           reason="not a business expense") | elsewhere)
        await work_done(desk)
        [reply] = await fake_slack.arrived("/response/o")
        assert await ledger_says(desk, ticket_id) == (TicketStatus.PENDING, [])

        at_home = await from_slack(desk, app, click(BOB, "approve", ticket_id, fake_slack.url("/response/h")))
        await work_done(desk)

    assert clicked.status_code == 200 and reply["response_type"] == "ephemeral"
    assert "T0OTHER" in reply["text"] and "SLACK_TEAM_ID" in reply["text"]
    assert "T0OTHER" in submitted.json()["errors"]["reason"]  # the form stays open, saying why
    assert at_home.status_code == 200 and (await ledger_says(desk, ticket_id))[0] is TicketStatus.APPROVED


async def test_an_unknown_slack_user_gets_a_reply_only_they_see_and_decides_nothing(desk, slack_app, fake_slack):
    session_id, call_id, ticket_id = await ask(slack_app)

    answer = await from_slack(desk, slack_app, click(STRANGER, "approve", ticket_id, fake_slack.url("/response/m")))
    await work_done(desk)

    assert answer.status_code == 200
    [reply] = await fake_slack.arrived("/response/m")
    assert (reply["response_type"], reply["replace_original"]) == ("ephemeral", False)
    assert STRANGER in reply["text"] and "SLACK_APPROVERS" in reply["text"]
    assert await ledger_says(desk, ticket_id) == (TicketStatus.PENDING, [])
    assert await conversation_says(slack_app, session_id, call_id) == ([], [])


async def test_slacks_url_is_served_in_production_mode_only_with_slack_approvals_on(fake_slack, configure):
    desk = configure(**slack_settings(fake_slack, production=True, trusted_user_header="X-Forwarded-User"))
    async with in_process(desk) as app:
        body, headers = signed({"type": "block_actions"}, at=desk.ledger.now().timestamp(),
                               secret="not-the-signing-secret-of-this-app")
        refused = await app.post("/slack/actions", content=body, headers=headers)
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_signature"

    configure(slack_signing_secret=None)  # Slack approvals off: nothing is served there
    async with in_process(desk) as app:
        closed = await app.post("/slack/actions", content=body, headers=headers)
    assert closed.status_code == 404 and closed.json()["error"] == "not_served"


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
