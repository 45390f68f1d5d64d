"""The two-person rule: above DUAL_APPROVAL_ABOVE ($5,000 by default), two approvals from two approvers.

The first approval leaves the ticket waiting ("1 of 2", in the CLI, the API,
the inbox and the audit trail) and tells the requester's conversation without
a model turn; the second decides and delivers it; a rejection by either ends
it. Racing approvers, or one approving twice, still end in one decision and
one payout, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio

import pytest
from support import cli
from support.conversation import Conversation, event_texts, pending_calls, responses
from support.desks import TestDesk
from support.models import RecordedOfflineModel, runner_with
from support.tickets import open_ticket_for

from long_running_agent.cli.render import report
from long_running_agent.delivery.courier import Courier, Outcome
from long_running_agent.delivery.notes import NOTE_MARK
from long_running_agent.ledger import (
    AlreadyApprovedByYou,
    AlreadyDecided,
    Ledger,
    NotAllowed,
    NotAnApprover,
    TicketStatus,
)
from long_running_agent.ledger.inputs import InputError
from long_running_agent.settings import SettingsError, load_settings
from long_running_agent.transcript import Transcript

SPONSORSHIP = "Reimburse $6,000 for the conference sponsorship"


async def ask_for_sponsorship(desk: TestDesk, db_url: str, model: RecordedOfflineModel | None = None):
    runner = runner_with(desk, model or RecordedOfflineModel(), db_url)
    chat = await Conversation(runner).start()
    events = await chat.say(SPONSORSHIP)
    [call] = pending_calls(events)
    [pending] = responses(events, "ask_for_approval")
    return runner, chat, call, pending["ticket_id"]


async def test_two_approvers_are_needed_and_the_first_is_shown_as_progress(desk, db_url):
    model = RecordedOfflineModel()
    runner, chat, call, ticket_id = await ask_for_sponsorship(desk, db_url, model)
    ledger = desk.ledger
    assert (await ledger.tickets.get(ticket_id)).approvals_needed == 2
    calls_before = len(model.requests)

    first = await Courier(desk).decide(ticket_id, approver="bob", approve=True)

    assert first.outcome is Outcome.WAITING and first.ticket.status is TicketStatus.PENDING
    assert (first.ticket.approvals_so_far, first.ticket.approvers) == ("1 of 2", ["bob"])
    assert await ledger.payouts.find(ticket_id=ticket_id) == []
    # The requester's conversation is told, with no model turn: an update of the same call, still pending.
    assert len(model.requests) == calls_before
    session = await runner.session_service.get_session(app_name=runner.app_name, user_id="alice",
                                                       session_id=chat.session_id)
    [update] = [r for e in session.events if e.author == "user" for r in e.get_function_responses()]
    assert (update.id, update.name) == (call.id, "ask_for_approval")
    assert update.response == {"status": "pending", "ticket_id": ticket_id, "approvals": "1 of 2"}
    [note] = [e for e in session.events if (e.custom_metadata or {}).get(NOTE_MARK)]
    assert note.author == "expense_agent"
    assert note.content.parts[0].text == f"bob approved ticket {ticket_id} (1 of 2: needs 1 more approver)."

    # Asked for news, the model (here the offline one) reads the progress from the updated call.
    news = await chat.say("Any news?")
    assert event_texts(news)[-1] == (f"Ticket {ticket_id} for $6,000.00 (conference sponsorship) has 1 of 2 approvals "
                               "and waits for another approver; I will pay once approved.")

    with pytest.raises(AlreadyApprovedByYou):
        await Courier(desk).decide(ticket_id, approver="bob", approve=True)
    second = await Courier(desk).decide(ticket_id, approver="carol", approve=True)

    assert second.delivered and second.ticket.status is TicketStatus.APPROVED
    assert second.ticket.approvers == ["bob", "carol"]
    [paid] = responses(second.events, "reimburse")
    assert (paid["status"], paid["amount"]) == ("paid", 6000.0)
    assert len(await ledger.payouts.find(ticket_id=ticket_id)) == 1
    assert [(e.action, e.actor) for e in await ledger.tickets.audit(ticket_id)] == [
        ("requested", "alice"), ("approval", "bob"), ("evidence", "bob"), ("approved", "carol"), ("evidence", "carol"),
        ("paid", "reimburse"), ("delivered", "approval_guard")]
    # The model never saw the progress note (only the updated call, and its own answer about it).
    assert all("needs 1 more approver" not in str(r.contents) for r in model.requests)
    assert "$6,000.00 for conference sponsorship was paid" in event_texts(second.events)[-1]


async def test_a_rejection_by_either_approver_ends_the_ticket(desk, sqlite_url, capsys):
    _runner, _chat, _call, ticket_id = await ask_for_sponsorship(desk, sqlite_url)
    await Courier(desk).decide(ticket_id, approver="bob", approve=True)

    rejected = await Courier(desk).decide(ticket_id, approver="carol", approve=False, reason="not budgeted")
    assert report(rejected, Transcript(verbose=False)) == 0
    assert f"Ticket {ticket_id} is rejected by carol;" in capsys.readouterr().out

    assert rejected.delivered and rejected.ticket.status is TicketStatus.REJECTED
    assert "rejected by carol (not budgeted)" in event_texts(rejected.events)[-1]
    with pytest.raises(AlreadyDecided):
        await Courier(desk).decide(ticket_id, approver="dave", approve=True)
    assert await desk.ledger.payouts.find(ticket_id=ticket_id) == []


async def test_the_requester_is_neither_approver(desk, sqlite_url):
    _runner, _chat, _call, ticket_id = await ask_for_sponsorship(desk, sqlite_url)
    with pytest.raises(NotAllowed):
        await Courier(desk).decide(ticket_id, approver="alice", approve=True)
    await Courier(desk).decide(ticket_id, approver="bob", approve=True)
    with pytest.raises(NotAllowed):
        await Courier(desk).decide(ticket_id, approver="Alice", approve=True)
    assert (await desk.ledger.tickets.get(ticket_id)).status is TicketStatus.PENDING


async def _race(db_url: str, ticket_id: str, approvers: tuple[str, str]) -> list[object]:
    ledgers = [Ledger(db_url) for _ in approvers]  # one connection each, as two processes have
    try:
        return await asyncio.gather(*(ledger.tickets.decide(ticket_id, approver=name, approve=True)
                                      for ledger, name in zip(ledgers, approvers, strict=True)),
                                    return_exceptions=True)
    finally:
        for ledger in ledgers:
            await ledger.close()


async def test_two_approvers_racing_on_the_last_approval_decide_it_once(desk, db_url):
    _runner, _chat, _call, ticket_id = await ask_for_sponsorship(desk, db_url)
    await desk.ledger.tickets.decide(ticket_id, approver="bob", approve=True)

    results = await _race(db_url, ticket_id, ("carol", "dave"))

    assert sorted(type(r).__name__ for r in results) == ["AlreadyDecided", "Ticket"]
    ticket = await desk.ledger.tickets.get(ticket_id)
    assert ticket.status is TicketStatus.APPROVED and ticket.approvers[0] == "bob"
    assert [e.action for e in await desk.ledger.tickets.audit(ticket_id)].count("approved") == 1
    delivered = await deliver_now(desk, ticket_id)
    assert delivered and len(await desk.ledger.payouts.find(ticket_id=ticket_id)) == 1


async def deliver_now(desk: TestDesk, ticket_id: str) -> bool:
    return (await Courier(desk).deliver(ticket_id, actor="test")).delivered


@pytest.mark.parametrize("approvers, approved", [(("bob", "carol"), True), (("bob", "bob"), False)])
async def test_both_approvals_at_once_or_one_approver_twice_end_in_one_decision(desk, db_url, approvers, approved):
    _runner, _chat, _call, ticket_id = await ask_for_sponsorship(desk, db_url)

    results = await _race(db_url, ticket_id, approvers)

    ticket = await desk.ledger.tickets.get(ticket_id)
    if approved:
        # Two different approvers clicking together: one gave the first approval, the other the second.
        assert ticket.status is TicketStatus.APPROVED and sorted(ticket.approvers) == ["bob", "carol"]
        assert not any(isinstance(r, BaseException) for r in results)
    else:
        assert ticket.status is TicketStatus.PENDING and ticket.approvers == ["bob"]
        assert sorted(type(r).__name__ for r in results) == ["AlreadyApprovedByYou", "Ticket"]
    actions = [e.action for e in await desk.ledger.tickets.audit(ticket_id)]
    assert actions.count("approval") == 1 and actions.count("approved") == (1 if approved else 0)


async def _race_amounts(db_url: str, ticket_id: str, approvals: list[tuple[str, str | None]]) -> list[object]:
    """Approvals given at the same moment, each on its own connection, each with its amount (or none)."""
    ledgers = [Ledger(db_url) for _ in approvals]
    try:
        return await asyncio.gather(*(
            ledger.tickets.decide(ticket_id, approver=name, approve=True, amount=amount,
                          reason="within budget" if amount else None)
            for ledger, (name, amount) in zip(ledgers, approvals, strict=True)), return_exceptions=True)
    finally:
        for ledger in ledgers:
            await ledger.close()


async def test_racing_approvers_never_pay_more_than_the_smaller_amount_approved(desk, db_url):
    ledger = desk.ledger
    for _round in range(6):
        ticket = await open_ticket_for(ledger, 600_000)
        results = await _race_amounts(db_url, ticket.id, [("bob", "4000"), ("carol", "5500")])

        ticket = await ledger.tickets.get(ticket.id)
        outcomes = sorted(type(r).__name__ for r in results)
        if ticket.status is TicketStatus.APPROVED:
            # carol's went first; bob's, second, lowered it: $4,000 is what both agreed to.
            assert outcomes == ["Ticket", "Ticket"] and ticket.approvers == ["carol", "bob"]
        else:
            # bob's went first; carol's $5,500 is more than bob approved, so it decides nothing.
            assert outcomes == ["InputError", "Ticket"] and ticket.approvers == ["bob"]
            assert [r.field for r in results if isinstance(r, InputError)] == ["amount"]
        assert ticket.payable_cents == 400_000


async def test_an_approval_without_an_amount_keeps_the_smaller_amount_the_other_approved(desk, sqlite_url):
    ledger = desk.ledger
    ticket = await open_ticket_for(ledger, 600_000)
    await ledger.tickets.decide(ticket.id, approver="bob", approve=True, amount="4000", reason="within budget")

    with pytest.raises(InputError):
        await ledger.tickets.decide(ticket.id, approver="carol", approve=True, amount="6000")
    approved = await ledger.tickets.decide(ticket.id, approver="carol", approve=True)

    assert approved.status is TicketStatus.APPROVED and approved.payable_cents == 400_000


def test_the_cli_shows_one_of_two_and_the_second_approver_decides(sqlite_url):
    ticket_id = cli.request_ticket(sqlite_url, "Please reimburse $6,000 for the conference sponsorship")

    first = cli.expenses("approve", ticket_id, "--approver", "bob", url=sqlite_url)
    listed = cli.expenses("inbox", url=sqlite_url)
    again = cli.expenses("approve", ticket_id, "--approver", "bob", url=sqlite_url)
    second = cli.expenses("approve", ticket_id, "--approver", "carol", url=sqlite_url)

    assert first.returncode == 0, first.stderr
    assert f"Ticket {ticket_id}: 1 of 2: needs 1 more approver; approved by bob. The next approver" in first.stdout
    assert "Payouts for " + ticket_id + ": 0" in first.stdout
    assert "[1 of 2: needs 1 more approver; approved by bob]" in listed.stdout
    assert again.returncode == 1 and "no approver counts twice, so a different approver" in again.stderr
    assert second.returncode == 0 and f"Payouts for {ticket_id}: 1" in second.stdout
    assert f"Ticket {ticket_id} is approved by bob and carol;" in second.stdout
    shown = cli.expenses("show", ticket_id, url=sqlite_url).stdout
    assert '"approved_by": [\n    "bob",\n    "carol"\n  ]' in shown and "approval    by bob: 1 of 2" in shown


def test_with_approvers_set_the_cli_decides_only_as_those_names(sqlite_url):
    configured = {"APPROVERS": "bob:token-bob-1,carol:token-carol-1"}
    ticket_id = cli.request_ticket(sqlite_url, "Please reimburse $9,000 for the server")

    refused = [cli.expenses("approve", ticket_id, "--approver", who, url=sqlite_url, env=configured)
               for who in ("nobody1", "nobody2")]
    settle = cli.expenses("settle", ticket_id, "--approver", "nobody1", url=sqlite_url, env=configured)
    first = cli.expenses("approve", ticket_id, "--approver", "Bob", url=sqlite_url, env=configured)

    for result in [*refused, settle]:
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert "is not an approver: APPROVERS names bob, carol" in result.stderr
    # The canonical form of a configured name is that approver.
    assert first.returncode == 0 and f"Ticket {ticket_id}: 1 of 2: needs 1 more approver; approved by bob." in (
        first.stdout)
    audit = cli.expenses("show", ticket_id, url=sqlite_url, env=configured).stdout
    assert "nobody" not in audit and "Paid:" not in audit


async def test_an_approver_outside_approvers_decides_and_settles_nothing(sqlite_url):
    ledger = Ledger(sqlite_url, approvers=frozenset({"bob", "carol"}))
    try:
        ticket = await open_ticket_for(ledger, 900_000)
        with pytest.raises(NotAnApprover):
            await ledger.tickets.decide(ticket.id, approver="mallory", approve=True)
        await ledger.tickets.decide(ticket.id, approver="bob", approve=True)
        await ledger.tickets.decide(ticket.id, approver="carol", approve=True)
        await ledger.deliveries.mark_undelivered(ticket.id, actor="test", error="the conversation is gone")
        with pytest.raises(NotAnApprover):
            await ledger.deliveries.settle(ticket.id, approver="mallory")
        assert await ledger.payouts.find(ticket_id=ticket.id) == []
    finally:
        await ledger.close()


async def test_the_requester_cannot_be_one_of_two_approvers_even_from_the_dev_chat(desk, sqlite_url):
    ledger = desk.ledger
    ticket = await open_ticket_for(ledger, 900_000)
    with pytest.raises(NotAllowed):
        await ledger.tickets.decide(ticket.id, approver="alice", approve=True, from_chat=True)
    assert (await ledger.tickets.get(ticket.id)).approvers == []


def test_one_configured_approver_cannot_keep_the_two_person_rule(monkeypatch):
    monkeypatch.setenv("APPROVERS", "bob:token-bob-1")
    with pytest.raises(SettingsError, match="Add a second name:token to APPROVERS"):
        load_settings()
