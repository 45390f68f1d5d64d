"""The requester withdraws a pending request: in the chat (a tool the model calls) or from the CLI.

Only the requester can; the pending call is answered "withdrawn" (same id and
name) and the conversation says so; a withdrawn ticket is never decided or
paid; and a withdrawal racing an approval ends in exactly one of the two.
"""

from __future__ import annotations

import asyncio
import subprocess

import pytest
from support import cli
from support.conversation import Conversation, calls, event_texts, pending_calls, responses
from support.models import ScriptedModel, call_part, make_runner, runner_with, text_part
from support.processes import request_ticket, run, start

from long_running_agent.delivery.courier import Courier
from long_running_agent.ledger import AlreadyDecided, Ledger, NotRequester, TicketStatus

TWO = "Reimburse $250 for the team lunch and $480 for the conference ticket"


async def test_the_requester_withdraws_in_the_chat_and_the_pending_call_is_answered(desk, db_url):
    runner = make_runner(desk, db_url)
    chat = await Conversation(runner).start()
    asked = await chat.say(TWO)
    lunch, conference = pending_calls(asked)
    lunch_ticket, conference_ticket = (r["ticket_id"] for r in responses(asked, "ask_for_approval"))

    withdrawn = await chat.say("Please cancel my conference ticket request")

    [cancel] = calls(withdrawn, "withdraw_request")
    assert cancel.args == {"ticket_id": conference_ticket}
    assert responses(withdrawn, "withdraw_request") == [{"status": "withdrawn", "ticket_id": conference_ticket}]
    assert f"Withdrawn: ticket {conference_ticket} for $480.00 (conference ticket)" in event_texts(withdrawn)[-1]
    # The pending call itself is answered, same id and name, once; the ledger says delivered.
    session = await runner.session_service.get_session(app_name=runner.app_name, user_id="alice",
                                                       session_id=chat.session_id)
    answers = [(r.id, r.name, r.response["status"]) for e in session.events if e.author == "user"
               for r in e.get_function_responses()]
    assert answers == [(conference.id, "ask_for_approval", "withdrawn")]
    ledger = desk.ledger
    ticket = await ledger.tickets.get(conference_ticket)
    assert (ticket.status, ticket.decided_by, ticket.delivered_at is not None) == (TicketStatus.WITHDRAWN, "alice",
                                                                                   True)
    # The other one still waits, and the conversation goes on knowing both.
    assert (await ledger.tickets.get(lunch_ticket)).status is TicketStatus.PENDING
    news = await chat.say("any news?")
    assert lunch_ticket in event_texts(news)[-1] and conference_ticket not in event_texts(news)[-1]
    assert lunch.id != conference.id

    # An approver cannot decide it any more, and nothing is paid.
    with pytest.raises(AlreadyDecided, match="withdrawn by its requester, alice"):
        await Courier(desk).decide(conference_ticket, approver="bob", approve=True)
    assert await ledger.payouts.find(ticket_id=conference_ticket) == []


async def test_only_the_requester_can_withdraw(desk, sqlite_url):
    alice = await Conversation(make_runner(desk, sqlite_url)).start()
    [ticket] = responses(await alice.say("Reimburse $250 for the team lunch"), "ask_for_approval")
    ticket_id = ticket["ticket_id"]
    # bob's own conversation, with a model that tries to withdraw alice's ticket.
    model = ScriptedModel(script=[call_part("withdraw_request", ticket_id=ticket_id), text_part("Could not.")])
    bob = await Conversation(runner_with(desk, model, sqlite_url), user_id="bob").start()

    tried = await bob.say(f"cancel {ticket_id}")

    [refused] = responses(tried, "withdraw_request")
    assert refused["status"] == "error" and f"bob did not request ticket {ticket_id}" in refused["error"]
    assert (await desk.ledger.tickets.get(ticket_id)).status is TicketStatus.PENDING
    with pytest.raises(NotRequester):
        await desk.ledger.tickets.withdraw(ticket_id, requester="carol")


def test_the_cli_withdraws_for_the_requester_and_tells_the_conversation(sqlite_url):
    ticket_id = cli.request_ticket(sqlite_url)

    other = cli.expenses("withdraw", ticket_id, "--user", "bob", url=sqlite_url)
    withdrawn = cli.expenses("withdraw", ticket_id, "--user", "alice", url=sqlite_url)
    approve = cli.expenses("approve", ticket_id, "--approver", "bob", url=sqlite_url)
    again = cli.expenses("withdraw", ticket_id, "--user", "alice", url=sqlite_url)

    assert other.returncode == 1 and f"bob did not request ticket {ticket_id}" in other.stderr
    assert withdrawn.returncode == 0, withdrawn.stderr
    assert f"Ticket {ticket_id} for $250.00 (team lunch) is withdrawn; nothing was paid." in withdrawn.stdout
    assert f"Ticket {ticket_id} was withdrawn by alice; the decision reached the conversation" in withdrawn.stdout
    assert approve.returncode == 1 and "withdrawn by its requester, alice" in approve.stderr
    assert again.returncode == 1 and "withdrawn by its requester" in again.stderr
    shown = cli.expenses("show", ticket_id, url=sqlite_url).stdout
    assert "withdrawn   by alice: withdrawn by the requester" in shown and "Paid:" not in shown


async def test_a_withdrawal_racing_an_approval_ends_in_exactly_one(desk, db_url):
    chat = await Conversation(make_runner(desk, db_url)).start()
    outcomes = []
    for _ in range(5):
        [ticket] = responses(await chat.say("Reimburse $250 for the team lunch"), "ask_for_approval")
        ledgers = [Ledger(db_url) for _ in range(2)]  # two connections, as two processes have
        try:
            results = await asyncio.gather(
                ledgers[0].tickets.withdraw(ticket["ticket_id"], requester="alice"),
                ledgers[1].tickets.decide(ticket["ticket_id"], approver="bob", approve=True),
                return_exceptions=True,
            )
        finally:
            for ledger in ledgers:
                await ledger.close()
        [won] = [r for r in results if not isinstance(r, BaseException)]
        assert [type(r) for r in results if isinstance(r, BaseException)] == [AlreadyDecided]
        stored = await desk.ledger.tickets.get(ticket["ticket_id"])
        assert stored.status == won.status
        actions = [e.action for e in await desk.ledger.tickets.audit(stored.id)]
        evidence = ["evidence"] if won.status is TicketStatus.APPROVED else []  # an approver's, in the chain too
        assert actions == ["requested", str(won.status), *evidence]
        outcomes.append(won.status)
    assert set(outcomes) <= {TicketStatus.WITHDRAWN, TicketStatus.APPROVED}


@pytest.mark.subprocess
def test_the_cli_withdrawal_and_approval_at_once_pay_at_most_once(sqlite_url):
    ticket_id = request_ticket(sqlite_url)
    processes = [start("withdraw", ticket_id, "--user", "alice", url=sqlite_url),
                 start("approve", ticket_id, "--approver", "bob", url=sqlite_url)]
    results = []
    for process in processes:
        try:
            out, err = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        results.append((process.returncode, out, err))
    assert sorted(code for code, _out, _err in results) == [0, 1], results
    shown = run("show", ticket_id, url=sqlite_url).stdout
    withdrawn = '"status": "withdrawn"' in shown
    assert withdrawn != ('"status": "approved"' in shown)
    assert shown.count("Paid: P-") == (0 if withdrawn else 1)
