"""From a click in Slack to one decision: Approve, Reject and Approve less decide as every other surface does,
under the ledger's rules (the requester is no approver, no approver counts twice, two clicks at once decide once),
and each ends with the ledger, the conversation and the Slack message saying the same thing.

A fake Slack on 127.0.0.1 (tests/support/fake_slack.py) takes the message's response_url and the Web API's
views.open; `make web`'s server runs in-process on the test's desk (tests/support/slack_approvals.py).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from support.fake_slack import ALICE, BOB, BOT_TOKEN, CAROL, STRANGER, click, submission
from support.http import as_approver
from support.servers import LUNCH, in_process
from support.slack_approvals import (
    INBOX,
    all_sent,
    ask,
    buttons,
    conversation_says,
    form,
    from_slack,
    ledger_says,
    outcome,
    slack_settings,
    work_done,
)
from support.slack_docs import same_shape, shown_in_docs

from long_running_agent.ledger import TicketStatus

# --- a click, decided once --------------------------------------------------------------------


async def test_approve_in_slack_pays_once_and_replaces_the_message(desk, slack_app, fake_slack):
    session_id, call_id, ticket_id = await ask(slack_app)
    response_url = fake_slack.url("/response/bob")

    answer = await from_slack(desk, slack_app, click(BOB, "approve", ticket_id, response_url))
    await work_done(desk)

    assert answer.status_code == 200 and answer.content == b""
    status, payouts = await ledger_says(desk, ticket_id)
    [(payout_id, cents)] = payouts
    assert (status, cents) == (TicketStatus.APPROVED, 25_000)
    assert await conversation_says(slack_app, session_id, call_id) == (["approved"], [(payout_id, 250.0)])
    [update] = await fake_slack.arrived("/response/bob")
    assert update["replace_original"] is True and buttons(update) == []
    assert outcome(update) == f"Approved by bob · paid $250.00 · {payout_id}"
    assert same_shape(update, shown_in_docs("updated")), "docs/slack.md shows an old update"
    await all_sent(desk, ticket_id)
    ticket = (await slack_app.get(f"/api/approvals/{ticket_id}", headers=as_approver("carol"))).json()
    assert ("slack.update", "sent") in [(n["event"], n["state"]) for n in ticket["notifications"]]


async def test_the_requester_clicking_approve_is_refused_by_the_ledger(desk, slack_app, fake_slack):
    session_id, call_id, ticket_id = await ask(slack_app)

    await from_slack(desk, slack_app, click(ALICE, "approve", ticket_id, fake_slack.url("/response/a")))
    await work_done(desk)

    replies = await fake_slack.arrived("/response/a", 2)
    [refusal] = [r for r in replies if r.get("response_type") == "ephemeral"]
    [update] = [r for r in replies if r.get("replace_original")]
    assert f"alice requested ticket {ticket_id} and cannot approve or reject it" in refusal["text"]
    # The message shows the ticket as it stands: still waiting, buttons still there.
    assert outcome(update) is None and buttons(update) == ["approve", "reject", "approve_less"]
    assert await ledger_says(desk, ticket_id) == (TicketStatus.PENDING, [])
    assert await conversation_says(slack_app, session_id, call_id) == ([], [])
    audit = (await slack_app.get(f"/api/approvals/{ticket_id}", headers=as_approver("bob"))).json()["audit"]
    assert [e["action"] for e in audit] == ["requested"]


@pytest.mark.parametrize("text, approvals", [(LUNCH, 1), ("Please reimburse $6,000 for the conference sponsorship", 2)],
                         ids=["one approver", "two-person rule"])
async def test_two_approvers_clicking_at_once_decide_once_and_pay_once(db_url, desk, slack_app, fake_slack, text,
                                                                       approvals):
    session_id, call_id, ticket_id = await ask(slack_app, text)

    answers = await asyncio.gather(
        from_slack(desk, slack_app, click(BOB, "approve", ticket_id, fake_slack.url("/response/bob"), "trigger-bob")),
        from_slack(desk, slack_app,
                   click(CAROL, "approve", ticket_id, fake_slack.url("/response/carol"), "trigger-carol")))
    await work_done(desk)

    assert [a.status_code for a in answers] == [200, 200]
    await all_sent(desk, ticket_id)
    status, payouts = await ledger_says(desk, ticket_id)
    [(payout_id, _cents)] = payouts
    assert status is TicketStatus.APPROVED
    decisions, paid = await conversation_says(slack_app, session_id, call_id)
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


async def test_the_same_approver_twice_on_the_two_person_rule_is_one_approval(desk, slack_app, fake_slack):
    _session, _call, ticket_id = await ask(slack_app, "Please reimburse $6,000 for the conference sponsorship")
    await from_slack(desk, slack_app, click(BOB, "approve", ticket_id, fake_slack.url("/response/1"), "t1"))
    await work_done(desk)
    await from_slack(desk, slack_app, click(BOB, "approve", ticket_id, fake_slack.url("/response/2"), "t2"))
    await work_done(desk)
    await all_sent(desk, ticket_id)

    [refusal] = [m for m in fake_slack.at("/response/2") if m.get("response_type") == "ephemeral"]
    assert f"bob already approved ticket {ticket_id}" in refusal["text"]
    assert "no approver counts twice" in refusal["text"]
    assert await ledger_says(desk, ticket_id) == (TicketStatus.PENDING, [])


async def test_a_first_of_two_approvals_shows_on_the_message_and_the_second_approver_gets_buttons(
        desk, slack_app, fake_slack):
    _session, _call, ticket_id = await ask(slack_app, "Please reimburse $6,000 for the conference sponsorship")
    await fake_slack.arrived("/hook")
    first = await from_slack(desk, slack_app, click(BOB, "approve", ticket_id, fake_slack.url("/response/1")))
    await work_done(desk)

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
    assert await ledger_says(desk, ticket_id) == (TicketStatus.PENDING, [])
    # The decision's evidence: through Slack, as the user and workspace Slack's signed request named.
    [decision] = (await desk.ledger.evidence(ticket_id))["decisions"]
    assert (decision["channel"], decision["principal"]) == (
        "slack", {"slack_user": BOB, "slack_team": "T0TEAM", "approver": "bob"})


async def test_after_a_first_approval_for_less_the_messages_show_the_amount_it_approved(desk, slack_app, fake_slack):
    _session, _call, ticket_id = await ask(slack_app, "Please reimburse $6,000 for the conference sponsorship")
    await fake_slack.arrived("/hook")
    await from_slack(desk, slack_app, submission(BOB, form("approve_less", ticket_id, fake_slack.url("/response/1")),
                                                 amount="5500", reason="the sponsorship cap"))
    await work_done(desk)
    [update] = await fake_slack.arrived("/response/1")
    [_requested, first_approval] = await fake_slack.arrived("/hook", 2)
    await from_slack(desk, slack_app,
                     click(CAROL, "approve_less", ticket_id, fake_slack.url("/response/2"), "trigger-2"))
    await work_done(desk)
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
    assert await ledger_says(desk, ticket_id) == (TicketStatus.PENDING, [])


# --- words: Reject and Approve less ---------------------------------------------------------


async def test_approve_less_through_the_form_pays_the_lower_amount(desk, slack_app, fake_slack):
    session_id, call_id, ticket_id = await ask(slack_app)
    response_url = fake_slack.url("/response/less")

    await from_slack(desk, slack_app, click(BOB, "approve_less", ticket_id, response_url, "trigger-less"))
    await work_done(desk)
    [opened] = await fake_slack.arrived("/api/views.open")
    [call] = [p for p in fake_slack.posted if p.path == "/api/views.open"]
    assert call.headers["Authorization"] == f"Bearer {BOT_TOKEN}"  # slack_sdk's WebClient, at SLACK_API_URL
    assert opened["trigger_id"] == "trigger-less" and opened["view"]["callback_id"] == "approve_less"
    assert json.loads(opened["view"]["private_metadata"]) == {"ticket": ticket_id, "response_url": response_url}
    assert await ledger_says(desk, ticket_id) == (TicketStatus.PENDING, [])  # a form opened; nothing decided

    too_much = await from_slack(desk, slack_app,
                                submission(BOB, opened["view"], amount="300", reason="over the per diem"))
    assert too_much.status_code == 200 and set(too_much.json()["errors"]) == {"amount"}  # shown in the form
    assert await ledger_says(desk, ticket_id) == (TicketStatus.PENDING, [])

    submitted = await from_slack(desk, slack_app,
                                 submission(BOB, opened["view"], amount="200", reason="over the per diem"))
    await work_done(desk)

    assert submitted.status_code == 200 and submitted.content == b""  # the form closes
    status, [(payout_id, cents)] = await ledger_says(desk, ticket_id)
    assert (status, cents) == (TicketStatus.APPROVED, 20_000)
    assert await conversation_says(slack_app, session_id, call_id) == (["approved"], [(payout_id, 200.0)])
    [update] = await fake_slack.arrived("/response/less")
    assert outcome(update) == f"Approved by bob · paid $200.00 of the $250.00 asked · {payout_id}"


async def test_reject_through_the_form_needs_a_reason_and_tells_the_conversation(desk, slack_app, fake_slack):
    session_id, call_id, ticket_id = await ask(slack_app)
    await from_slack(desk, slack_app, click(CAROL, "reject", ticket_id, fake_slack.url("/response/no"), "trigger-no"))
    await work_done(desk)
    [opened] = await fake_slack.arrived("/api/views.open")

    blank = await from_slack(desk, slack_app, submission(CAROL, opened["view"], reason="  "))
    assert set(blank.json()["errors"]) == {"reason"}
    stranger = await from_slack(desk, slack_app, submission(STRANGER, opened["view"], reason="not a business expense"))
    assert STRANGER in stranger.json()["errors"]["reason"]  # a form passed on decides nothing either
    assert await ledger_says(desk, ticket_id) == (TicketStatus.PENDING, [])
    await from_slack(desk, slack_app, submission(CAROL, opened["view"], reason="not a business expense"))
    await work_done(desk)

    assert await ledger_says(desk, ticket_id) == (TicketStatus.REJECTED, [])
    assert await conversation_says(slack_app, session_id, call_id) == (["rejected"], [])
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
async def test_a_form_whose_amount_or_reason_is_refused_stays_open_saying_why(
        desk, slack_app, fake_slack, kind, amount, reason, block):
    _session, _call, ticket_id = await ask(slack_app, "Please reimburse $6,000 for the conference sponsorship")
    await desk.ledger.tickets.decide(ticket_id, approver="bob", approve=True, amount="5500", reason="the cap")

    answer = await from_slack(desk, slack_app, submission(CAROL, form(kind, ticket_id, fake_slack.url("/response/c")),
                                                          amount=amount, reason=reason))
    await work_done(desk)

    assert answer.status_code == 200
    assert answer.json()["response_action"] == "errors" and list(answer.json()["errors"]) == [block]
    ticket = await desk.ledger.tickets.get(ticket_id)
    assert (ticket.status, ticket.approvers, ticket.payable_cents) == (TicketStatus.PENDING, ["bob"], 550_000)
    assert fake_slack.at("/response/c") == []


async def test_a_form_slack_cannot_open_is_said_to_the_person_who_clicked(desk, slack_app, fake_slack):
    fake_slack.views_error = "expired_trigger_id"
    _session, _call, ticket_id = await ask(slack_app)

    await from_slack(desk, slack_app, click(CAROL, "reject", ticket_id, fake_slack.url("/response/no")))
    await work_done(desk)

    [reply] = await fake_slack.arrived("/response/no")
    assert reply["response_type"] == "ephemeral" and "expired_trigger_id" in reply["text"]
    assert f"{INBOX}#{ticket_id}" in reply["text"]
    assert await ledger_says(desk, ticket_id) == (TicketStatus.PENDING, [])


async def test_without_a_bot_token_reject_and_approve_less_link_to_the_ticket_on_the_inbox_page(
        desk, fake_slack, configure):
    configure(**slack_settings(fake_slack, slack_bot_token=None))
    async with in_process(desk) as app:
        _session, _call, ticket_id = await ask(app)
        [message] = await fake_slack.arrived("/hook")
        [actions] = [b for b in message["blocks"] if b["type"] == "actions"]
        links = {e["action_id"]: e.get("url") for e in actions["elements"]}
        clicked = await from_slack(desk, app, click(BOB, "reject_in_inbox", ticket_id, fake_slack.url("/response/r")))
        await work_done(desk)

    assert links == {"approve": None, "reject_in_inbox": f"{INBOX}#{ticket_id}",
                     "approve_less_in_inbox": f"{INBOX}#{ticket_id}"}
    assert clicked.status_code == 200  # Slack reports a link's click too; the browser does the rest
    assert fake_slack.at("/response/r") == [] and fake_slack.at("/api/views.open") == []
    assert await ledger_says(desk, ticket_id) == (TicketStatus.PENDING, [])
