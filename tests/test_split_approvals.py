"""Splitting a request, however it is worded, does not dodge the two-person rule.

All a requester asked for (open or approved) or was paid without approval on one UTC day, whatever the purposes
say, and the requests of one message, add up toward DUAL_APPROVAL_ABOVE ($5,000 by default): the request that takes
the total past it needs two approvers, and the requester and the approvers are told why. A rejected, expired or
withdrawn request no longer counts. The totals are raised in the database,
one statement per request, so requests racing in two processes still cross
the line once.
"""

from __future__ import annotations

import asyncio

import pytest
from support import cli
from support.clock import FakeClock
from support.conversation import Conversation, responses
from support.desks import TestDesk
from support.http import as_approver
from support.models import RecordedOfflineModel, runner_with
from support.servers import TOKENS, in_process
from support.tickets import open_ticket_for

from long_running_agent.delivery.courier import Courier, Outcome
from long_running_agent.ledger import Conversation as Where
from long_running_agent.ledger import Ledger, TicketStatus, ToolCall
from long_running_agent.slack.messages import Buttons, notification_blocks

TWICE = "Reimburse $4,500 for the server and $4,500 for the server"


async def ask(desk: TestDesk, db_url: str, text: str,
              chat: Conversation | None = None) -> tuple[Conversation, list[dict]]:
    chat = chat or await Conversation(runner_with(desk, RecordedOfflineModel(), db_url)).start()
    return chat, responses(await chat.say(text), "ask_for_approval")


async def test_one_message_split_in_two_needs_a_second_approver_for_the_part_that_crosses_the_line(desk, db_url):
    _chat, answers = await ask(desk, db_url, TWICE)
    ledger = desk.ledger
    # The two calls run at once; whichever is added second crosses the line.
    one, two = sorted([await ledger.tickets.get(a["ticket_id"]) for a in answers], key=lambda t: t.approvals_needed)
    why = {a["ticket_id"]: a.get("why") for a in answers}

    assert (one.approvals_needed, two.approvals_needed) == (1, 2)
    assert two.combined_cents == 900_000 and why[one.id] is None
    # The requester is told why, naming the request it was added to.
    assert one.id in why[two.id] and "$9,000.00" in why[two.id]

    assert (await Courier(desk).decide(one.id, approver="bob", approve=True)).delivered
    waiting = await Courier(desk).decide(two.id, approver="bob", approve=True)
    assert waiting.outcome is Outcome.WAITING
    assert [p.amount_cents for p in await ledger.payouts.find(ticket_id=one.id)] == [450_000]
    assert await ledger.payouts.find(ticket_id=two.id) == []  # bob alone got $4,500 paid, not $9,000
    assert (await Courier(desk).decide(two.id, approver="carol", approve=True)).delivered
    assert [p.amount_cents for p in await ledger.payouts.find(ticket_id=two.id)] == [450_000]


async def test_every_request_of_the_day_adds_up_whatever_its_purpose(desk, sqlite_url):
    chat, [first] = await ask(desk, sqlite_url, "Reimburse $4,500 for the server")
    _chat, [second] = await ask(desk, sqlite_url, "Reimburse $4,500 for a server.", chat)
    _chat, [other] = await ask(desk, sqlite_url, "Reimburse $4,500 for the office chairs", chat)
    ledger = desk.ledger

    assert [(await ledger.tickets.get(r["ticket_id"])).approvals_needed for r in (first, second, other)] == [1, 2, 2]


# What a hostile probe reworded to split $9,000 between two chats, each past one approver alone.
REWORDED = [("team dinner", "dinner for the team"), ("offsite dinner 1/2", "offsite dinner 2/2"),
            ("team dinner", "team dinner (part 2)"), ("team dinner", "team dinner #2"), ("team dinner", "team dinner)"),
            ("team dinner", "team dinner —"), ("team dinner", "team dinner 🍽"), ("client lunch", "hotel nights")]


@pytest.mark.parametrize("first, second", REWORDED)
async def test_rewording_a_split_does_not_dodge_the_two_person_rule(desk, sqlite_url, first, second):
    ledger = desk.ledger
    # Two chats of alice's, each one message: what the tools ask the ledger.
    chats = [ToolCall(Where("long_running_agent", "alice", f"chat-{n}"), call_id="adk-1", message_id=f"m-{n}")
             for n in (1, 2)]
    one = await ledger.request_approval(chats[0], purpose=first, amount=4500)
    two = await ledger.request_approval(chats[1], purpose=second, amount=4500)

    assert (one.ticket.approvals_needed, two.ticket.approvals_needed) == (1, 2)
    # The requester is told why, naming the first request, and never to split.
    why = two.as_response()["why"]
    assert one.ticket.id in why and "whatever each is for" in why and "split" not in why


async def test_what_was_paid_without_approval_that_day_counts_too(desk, sqlite_url):
    chat, _taxi = await ask(desk, sqlite_url, "Reimburse $90 for a taxi")
    _chat, [large] = await ask(desk, sqlite_url, "Reimburse $4,950 for the conference fees", chat)

    assert (await desk.ledger.tickets.get(large["ticket_id"])).approvals_needed == 2
    assert "$90.00 paid to you without approval today" in large["why"]


async def test_one_message_with_different_purposes_adds_up_too(desk, sqlite_url):
    _chat, tickets = await ask(desk, sqlite_url, "Reimburse $3,000 for a laptop and $3,000 for a monitor")
    ledger = desk.ledger

    assert sorted([(await ledger.tickets.get(r["ticket_id"])).approvals_needed for r in tickets]) == [1, 2]


async def test_a_rejected_request_no_longer_counts_and_a_new_day_starts_afresh(desk, sqlite_url, clock: FakeClock):
    ledger = desk.ledger
    rejected = await open_ticket_for(ledger, 450_000, purpose="server")
    await ledger.tickets.decide(rejected.id, approver="bob", approve=False, reason="wrong quote")
    again = await open_ticket_for(ledger, 450_000, purpose="server", session="s-2")
    crossing = await open_ticket_for(ledger, 450_000, purpose="server", session="s-3")
    clock.advance(hours=24)
    tomorrow = await open_ticket_for(ledger, 450_000, purpose="server", session="s-4")

    assert [t.approvals_needed for t in (rejected, again, crossing, tomorrow)] == [1, 1, 2, 1]
    assert [t.id for t in await ledger.tickets.combined_with(crossing)] == [again.id]


async def test_the_calls_of_one_message_add_up_either_side_of_midnight(desk, db_url, clock: FakeClock):
    ledger = desk.ledger
    clock.now = clock.now.replace(hour=23, minute=59, second=59)
    before = await open_ticket_for(ledger, 450_000, purpose="server", message="turn-1")
    clock.advance(seconds=2)  # the next UTC day: the requester's day starts afresh, the message does not
    after = await open_ticket_for(ledger, 100_000, purpose="rack", message="turn-1", session="s-2")
    other = await open_ticket_for(ledger, 100_000, purpose="cables", session="s-3")

    assert [t.approvals_needed for t in (before, after, other)] == [1, 2, 1]


async def test_requests_racing_in_two_processes_cross_the_line_once(db_url):
    for round_ in range(5):
        ledgers = [Ledger(db_url) for _ in range(2)]
        try:
            opened = await asyncio.gather(*(
                open_ticket_for(ledger, 450_000, user=f"dave{round_}", session=f"s-{round_}-{n}")
                for n, ledger in enumerate(ledgers)))
        finally:
            for ledger in ledgers:
                await ledger.close()
        assert sorted(t.approvals_needed for t in opened) == [1, 2]


async def split_in_two(desk: TestDesk, db_url: str) -> tuple[str, str]:
    """alice's $9,000 asked in two chats, worded differently: the tickets (first, second)."""
    _chat, [first] = await ask(desk, db_url, "Reimburse $4,500 for team dinner")
    _chat, [second] = await ask(desk, db_url, "Reimburse $4,500 for dinner for the team")
    return first["ticket_id"], second["ticket_id"]


async def test_the_api_and_the_slack_message_show_the_requesters_other_requests_today(
        desk, sqlite_url, clock: FakeClock):
    desk.configure(approvers={TOKENS["bob"]: "bob"})
    async with in_process(desk) as client:
        first, second = await split_in_two(desk, sqlite_url)
        listed = (await client.get("/api/approvals", headers=as_approver("bob"))).json()
        shown = (await client.get(f"/api/approvals/{second}", headers=as_approver("bob"))).json()

    days = {t["id"]: t["requester_today"] for t in listed["pending"]}
    assert days[second] == shown["ticket"]["requester_today"] == {
        "day": clock().date().isoformat(), "total": 9000.0, "paid_without_approval": 0.0, "others_count": 1,
        "others": [{"id": first, "status": "pending", "amount": 4500.0, "purpose": "team dinner"}]}
    assert days[first]["others"][0]["id"] == second
    # Slack's message draws its fields from the same JSON, what users wrote escaped.
    fields = [f["text"] for block in notification_blocks({"text": "", "ticket": shown["ticket"]}, Buttons(forms=True))
              for f in block.get("fields", [])]
    assert f"*alice today*\n$9,000.00 in all: {first} ($4,500.00, pending) for team dinner" in fields
    shown["ticket"]["requester_today"]["others"][0]["purpose"] = "<!channel>"
    assert "for &lt;!channel&gt;" in str(notification_blocks({"text": "", "ticket": shown["ticket"]},
                                                             Buttons(forms=True)))


def test_the_cli_shows_the_requesters_other_requests_today_under_each_ticket(sqlite_url):
    for purpose in ("team dinner", "dinner for the team"):
        asked = cli.expenses("request", f"Reimburse $4,500 for {purpose}", "--user", "alice", url=sqlite_url)
        assert asked.returncode == 0, asked.stderr
    lines = cli.expenses("inbox", url=sqlite_url).stdout.splitlines()

    [first_at] = [n for n, line in enumerate(lines) if line.endswith("  team dinner")]
    [second_at] = [n for n, line in enumerate(lines) if "dinner for the team  [needs 2 approvers]" in line]
    first, second = lines[first_at].split()[0], lines[second_at].split()[0]
    assert lines[first_at + 1].split() == (
        f"alice today: $9,000.00 in all: {second} ($4,500.00, pending) for dinner for the team").split()
    assert f"{first} ($4,500.00, pending) for team dinner" in lines[second_at + 1]
    shown = cli.expenses("show", second, url=sqlite_url).stdout
    assert f"alice today: $9,000.00 in all: {first} ($4,500.00, pending) for team dinner" in shown
    assert TicketStatus.PENDING in shown


async def test_a_look_alike_purpose_is_the_same_purpose_or_refused(desk, sqlite_url):
    chat, [plain] = await ask(desk, sqlite_url, "Reimburse $4,500 for the server")
    _chat, [wide] = await ask(desk, sqlite_url, "Reimburse $4,500 for the \uff53\uff45\uff52\uff56\uff45\uff52", chat)
    _chat, [mixed] = await ask(desk, sqlite_url, "Reimburse $4,500 for the s\u0435rver", chat)  # a Cyrillic "е"
    ledger = desk.ledger

    # Full-width letters are the same letters: the second request crosses the line.
    assert [(await ledger.tickets.get(r["ticket_id"])).approvals_needed for r in (plain, wide)] == [1, 2]
    assert (await ledger.tickets.get(wide["ticket_id"])).purpose == "server"
    # A word mixing alphabets opens nothing.
    assert mixed["status"] == "error" and "mixes Cyrillic and Latin letters" in mixed["error"]
    assert len(await ledger.tickets.with_status()) == 2
