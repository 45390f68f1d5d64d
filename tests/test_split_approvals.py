"""Splitting a request does not dodge the two-person rule.

A requester's open or approved requests for the same purpose on one UTC day,
and the requests of one message, add up toward DUAL_APPROVAL_ABOVE ($5,000 by
default): the request that takes the total past it needs two approvers, and
the requester and the approvers are told why. A rejected, expired or
withdrawn request no longer counts. The totals are raised in the database,
one statement per request, so requests racing in two processes still cross
the line once.
"""

from __future__ import annotations

import asyncio

from support.clock import FakeClock
from support.conversation import Conversation, responses
from support.desks import current
from support.models import RecordedOfflineModel, ledger_at, runner_with
from support.processes import run
from support.tickets import open_ticket_for

from long_running_agent.approval.courier import Outcome, decide_and_deliver
from long_running_agent.ledger import Ledger, TicketStatus

TWICE = "Reimburse $4,500 for the server and $4,500 for the server"


async def ask(db_url: str, text: str, chat: Conversation | None = None) -> tuple[Conversation, list[dict]]:
    chat = chat or await Conversation(runner_with(RecordedOfflineModel(), db_url)).start()
    return chat, responses(await chat.say(text), "ask_for_approval")


async def test_one_message_split_in_two_needs_a_second_approver_for_the_part_that_crosses_the_line(db_url):
    _chat, answers = await ask(db_url, TWICE)
    ledger = ledger_at(db_url)
    # The two calls run at once; whichever is added second crosses the line.
    one, two = sorted([await ledger.tickets.get(a["ticket_id"]) for a in answers], key=lambda t: t.approvals_needed)
    why = {a["ticket_id"]: a.get("why") for a in answers}

    assert (one.approvals_needed, two.approvals_needed) == (1, 2)
    assert two.combined_cents == 900_000 and why[one.id] is None
    # The requester is told why, naming the request it was added to.
    assert one.id in why[two.id] and "$9,000.00" in why[two.id]

    assert (await decide_and_deliver(current(), one.id, approver="bob", approve=True)).delivered
    waiting = await decide_and_deliver(current(), two.id, approver="bob", approve=True)
    assert waiting.outcome is Outcome.WAITING
    assert [p.amount_cents for p in await ledger.payouts.find(ticket_id=one.id)] == [450_000]
    assert await ledger.payouts.find(ticket_id=two.id) == []  # bob alone got $4,500 paid, not $9,000
    assert (await decide_and_deliver(current(), two.id, approver="carol", approve=True)).delivered
    assert [p.amount_cents for p in await ledger.payouts.find(ticket_id=two.id)] == [450_000]


async def test_the_same_purpose_in_two_messages_adds_up_the_same_day(sqlite_url):
    chat, [first] = await ask(sqlite_url, "Reimburse $4,500 for the server")
    _chat, [second] = await ask(sqlite_url, "Reimburse $4,500 for a server.", chat)
    _chat, [other] = await ask(sqlite_url, "Reimburse $4,500 for the office chairs", chat)
    ledger = ledger_at(sqlite_url)

    assert [(await ledger.tickets.get(r["ticket_id"])).approvals_needed for r in (first, second, other)] == [1, 2, 1]


async def test_one_message_with_different_purposes_adds_up_too(sqlite_url):
    _chat, tickets = await ask(sqlite_url, "Reimburse $3,000 for a laptop and $3,000 for a monitor")
    ledger = ledger_at(sqlite_url)

    assert sorted([(await ledger.tickets.get(r["ticket_id"])).approvals_needed for r in tickets]) == [1, 2]


async def test_a_rejected_request_no_longer_counts_and_a_new_day_starts_afresh(sqlite_url, clock: FakeClock):
    ledger = ledger_at(sqlite_url)
    rejected = await open_ticket_for(ledger, 450_000, purpose="server")
    await ledger.tickets.decide(rejected.id, approver="bob", approve=False, reason="wrong quote")
    again = await open_ticket_for(ledger, 450_000, purpose="server", session="s-2")
    crossing = await open_ticket_for(ledger, 450_000, purpose="server", session="s-3")
    clock.advance(hours=24)
    tomorrow = await open_ticket_for(ledger, 450_000, purpose="server", session="s-4")

    assert [t.approvals_needed for t in (rejected, again, crossing, tomorrow)] == [1, 1, 2, 1]
    assert [t.id for t in await ledger.tickets.combined_with(crossing)] == [again.id]


async def test_requests_racing_in_two_processes_cross_the_line_once(db_url):
    for round_ in range(5):
        ledgers = [Ledger(db_url) for _ in range(2)]
        try:
            opened = await asyncio.gather(*(
                open_ticket_for(ledger, 450_000, purpose=f"server {round_}", session=f"s-{round_}-{n}")
                for n, ledger in enumerate(ledgers)))
        finally:
            for ledger in ledgers:
                await ledger.close()
        assert sorted(t.approvals_needed for t in opened) == [1, 2]


def test_the_approver_sees_why_two_approvers_are_needed(sqlite_url):
    asked = run("request", TWICE, "--user", "alice", url=sqlite_url)
    assert asked.returncode == 0, asked.stderr
    listed = run("inbox", url=sqlite_url)

    [one_line, two_line] = [line for line in listed.stdout.splitlines() if "server" in line]
    assert "needs 2 approvers" not in one_line
    assert "[needs 2 approvers: $9,000.00 with the same purpose or message today]" in two_line
    ticket_id = two_line.split()[0]
    shown = run("show", ticket_id, url=sqlite_url).stdout
    assert '"combined_amount": 9000.0' in shown
    assert TicketStatus.PENDING in shown


async def test_a_look_alike_purpose_is_the_same_purpose_or_refused(sqlite_url):
    chat, [plain] = await ask(sqlite_url, "Reimburse $4,500 for the server")
    _chat, [wide] = await ask(sqlite_url, "Reimburse $4,500 for the \uff53\uff45\uff52\uff56\uff45\uff52", chat)
    _chat, [mixed] = await ask(sqlite_url, "Reimburse $4,500 for the s\u0435rver", chat)  # a Cyrillic "е"
    ledger = ledger_at(sqlite_url)

    # Full-width letters are the same letters: the second request crosses the line.
    assert [(await ledger.tickets.get(r["ticket_id"])).approvals_needed for r in (plain, wide)] == [1, 2]
    assert (await ledger.tickets.get(wide["ticket_id"])).purpose == "server"
    # A word mixing alphabets opens nothing.
    assert mixed["status"] == "error" and "mixes Cyrillic and Latin letters" in mixed["error"]
    assert len(await ledger.tickets.with_status()) == 2
