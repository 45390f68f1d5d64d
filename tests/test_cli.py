"""As users run them: main.py (the demo), and the `expenses` approver CLI across separate processes.

What a command says and refuses is checked in this process, through the CLI's own `main(argv)` (support/cli.py).
"""

from __future__ import annotations

import asyncio
import re

import pytest
from support import cli
from support.desks import TestDesk
from support.processes import request_ticket, run, start
from support.servers import free_port
from support.tickets import decided_not_delivered, open_tickets

from long_running_agent.ledger import TicketStatus
from long_running_agent.names import EXPENSES

# Each test that starts a process says so; the others run `expenses` and the demo in this process (support/cli.py).


@pytest.mark.subprocess
def test_demo_shows_the_whole_flow_and_exits_zero(sqlite_url):
    result = run(url=sqlite_url)

    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Model:    offline-expense-model" in out
    call_id = re.search(r"pending  \| call id=(\S+) name=ask_for_approval ticket=(T-\S+)", out)
    assert call_id, out
    # The resume carries the same id and name as the pending call.
    assert f"FunctionResponse(id={call_id.group(1)}, name=ask_for_approval, status='approved')" in out
    assert re.search(r"calls reimburse\(purpose='team offsite lunch', amount=250.0\)", out)
    assert "The flow completed." in out
    assert "Event(" not in out and "model_dump" not in out


def test_the_demo_repeats_itself_on_one_database_and_leaves_no_ticket_pending(desk, sqlite_url):
    first, second = cli.demo(url=sqlite_url), cli.demo(url=sqlite_url)

    assert (first.returncode, second.returncode) == (0, 0), first.stdout + second.stdout + second.stderr
    assert _steps(first.stdout) == _steps(second.stdout)
    assert len(_steps(first.stdout)) == 4 and "needs_approval" not in second.stdout
    # Each run is a new employee, so the daily rules, per requester and day, hold for each and never bite.
    tickets, payouts = asyncio.run(_ledger_state(desk))
    assert [t.status for t in tickets] == ["approved", "approved"]
    assert sorted((p.ticket_id is None, p.amount_cents) for p in payouts) == [
        (False, 25_000), (False, 25_000), (True, 4_250), (True, 4_250)]
    assert len({p.user_id for p in payouts}) == 2


def _steps(out: str) -> list[str]:
    """The demo's steps, each with its lines, ids aside."""
    text = re.sub(r"adk-[0-9a-f-]{36}|\b[TP]-[0-9a-f]{12}\b|demo-[0-9a-f]{6}", "ID", out)
    return [step.strip() for step in re.split(r"\n(?=== )", text)[1:]]


async def _ledger_state(desk: TestDesk) -> tuple[list, list]:
    """Every ticket, oldest first (none left pending, asserted here), and every payout."""
    try:
        ledger = desk.ledger
        assert await ledger.tickets.with_status(TicketStatus.PENDING) == []
        tickets = [t for status in TicketStatus for t in await ledger.tickets.with_status(status)]
        return sorted(tickets, key=lambda t: t.created_at), await ledger.payouts.find()
    finally:
        await desk.close()


def test_demo_reject_pays_nothing_and_free_text_works(sqlite_url):
    rejected = cli.demo("--reject", url=sqlite_url)
    assert rejected.returncode == 0, rejected.stderr
    assert "rejected" in rejected.stdout and "calls reimburse(purpose='team offsite lunch'" not in rejected.stdout

    custom = cli.demo("--text", "Reimburse USD 1,250.50 for a conference ticket", url=sqlite_url)
    assert custom.returncode == 0, custom.stderr
    assert "amount=1250.5" in custom.stdout


# --text: what happened, and the exit status main.py's docstring gives it.
PAID, REFUSED, ASKED, PENDING = 0, 1, 4, 5


@pytest.mark.parametrize("text, status, paid, pending", [
    ("Reimburse $45 for a taxi", PAID, [4_500], 0),  # paid at once, with no approval
    ("Reimburse $250 for the team lunch", PAID, [25_000], 0),  # approved by the demo's approver, then paid
    ("Reimburse $250 EUR for the hotel", ASKED, [], 0),  # the agent asks for dollars
    ("Reimburse $0 for a pen", REFUSED, [], 0),  # reimburse refuses the amount
    ("Reimburse $6,000 for a server", PENDING, [], 1),  # the first of two approvals
    ("Reimburse $250 for the team lunch and $480 for the conference ticket", PENDING, [25_000], 1),
], ids=["paid-at-once", "paid-once-approved", "question", "refused", "second-approver", "second-ticket"])
def test_free_text_ends_with_the_exit_status_and_captions_of_what_happened(
        desk, sqlite_url, text, status, paid, pending):
    result = cli.demo("--text", text, url=sqlite_url)

    assert result.returncode == status, result.stdout + result.stderr
    payouts, waiting = asyncio.run(_payouts_and_pending(desk))
    assert sorted(p.amount_cents for p in payouts) == paid
    assert len(waiting) == pending
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("The flow completed") == (status == PAID)
    for ticket in waiting:  # the last line says who acts next, as a command to run
        assert f"{EXPENSES} approve {ticket.id} --approver NAME" in last
    # No step's caption claims what did not happen: a ticket or an approver where none was asked, a payment.
    captions = " ".join(re.findall(r"^== \d+\. (.+) ==$", result.stdout, re.MULTILINE))
    assert captions
    if "calls ask_for_approval" not in result.stdout:
        assert not re.search(r"ticket|approv", captions, re.IGNORECASE), captions
    if not paid:
        assert not re.search(r"\bpa(y|ys|id)\b", captions, re.IGNORECASE), captions


async def _payouts_and_pending(desk: TestDesk) -> tuple[list, list]:
    try:
        ledger = desk.ledger
        return await ledger.payouts.find(), await ledger.tickets.with_status(TicketStatus.PENDING)
    finally:
        await desk.close()


def test_main_py_given_an_approver_command_names_the_expenses_command_and_exits_two(sqlite_url):
    result = cli.demo("approve", "T-0123456789ab", "--approver", "bob", url=sqlite_url)

    assert result.returncode == 2 and result.stdout == "", (result.stdout, result.stderr)
    [line] = result.stderr.strip().splitlines()
    assert f"{EXPENSES} approve T-0123456789ab --approver bob" in line


@pytest.mark.subprocess
def test_request_then_approve_in_another_process_pays_once(desk, db_url):
    ticket_id = request_ticket(db_url)

    inbox = cli.expenses("inbox", url=db_url)  # what a process records, the commands in this one read
    assert ticket_id in inbox.stdout and "alice" in inbox.stdout and "$250" in inbox.stdout

    approved = run("approve", ticket_id, "--approver", "bob", url=db_url)
    assert approved.returncode == 0, approved.stderr
    assert f"Payouts for {ticket_id}: 1" in approved.stdout

    again = cli.expenses("approve", ticket_id, "--approver", "bob", url=db_url)
    assert again.returncode == 1 and "already approved" in again.stderr

    shown = cli.expenses("show", ticket_id, url=db_url)
    actions = re.findall(r"^\s+\S+ \S+\s+(\w+)\s+by", shown.stdout, re.M)
    assert actions == ["requested", "approved", "evidence", "paid", "delivered"], shown.stdout
    assert len(asyncio.run(_payouts(desk, ticket_id))) == 1


async def _payouts(desk: TestDesk, ticket_id: str):
    try:
        return await desk.ledger.payouts.find(ticket_id=ticket_id)
    finally:
        await desk.close()


@pytest.mark.subprocess
def test_two_processes_approving_at_once_pay_once(desk, db_url):
    ticket_id = request_ticket(db_url)

    racers = [start("approve", ticket_id, "--approver", name, url=db_url) for name in ("bob", "carol")]
    outputs = [p.communicate(timeout=120) for p in racers]  # reads both pipes while waiting
    outcomes = [(p.returncode, out, err) for p, (out, err) in zip(racers, outputs, strict=True)]

    assert sorted(code for code, _out, _err in outcomes) == [0, 1], outcomes
    assert any("already approved" in err for _code, _out, err in outcomes)
    assert len(asyncio.run(_payouts(desk, ticket_id))) == 1


def test_cli_errors_are_clear_and_nonzero(desk, sqlite_url):
    unknown = cli.expenses("approve", "T-doesnotexist", "--approver", "bob", url=sqlite_url)
    assert unknown.returncode == 1 and "No ticket 'T-doesnotexist'" in unknown.stderr

    ticket_id = cli.request_ticket(sqlite_url)
    own = cli.expenses("approve", ticket_id, "--approver", "alice", url=sqlite_url)
    assert own.returncode == 1 and "cannot approve" in own.stderr

    no_reason = cli.expenses("reject", ticket_id, "--approver", "bob", url=sqlite_url)
    assert no_reason.returncode == 2 and "--reason" in no_reason.stderr

    rejected = cli.expenses("reject", ticket_id, "--approver", "bob", "--reason", "no receipt", url=sqlite_url)
    assert rejected.returncode == 0 and "rejected" in rejected.stdout
    assert len(asyncio.run(_payouts(desk, ticket_id))) == 0


@pytest.mark.subprocess
def test_bad_settings_get_a_clear_error(sqlite_url, monkeypatch):
    monkeypatch.setenv("APPROVAL_THRESHOLD", "lots")
    result = run("inbox", url=sqlite_url)
    assert result.returncode == 1 and "APPROVAL_THRESHOLD='lots' is not a number" in result.stderr


def test_a_decision_whose_process_died_is_delivered_by_resume(desk, sqlite_url):
    ticket_id = cli.request_ticket(sqlite_url)

    async def decide_only() -> None:
        await desk.ledger.tickets.decide(ticket_id, approver="bob", approve=True)
        await desk.close()

    asyncio.run(decide_only())  # recorded, but nothing resumed the conversation

    approve = cli.expenses("approve", ticket_id, "--approver", "bob", url=sqlite_url)
    assert approve.returncode == 1 and f"{EXPENSES} deliver {ticket_id}" in approve.stderr

    resumed = cli.expenses("deliver", ticket_id, url=sqlite_url)
    assert resumed.returncode == 0 and "was paid" in resumed.stdout

    again = cli.expenses("deliver", ticket_id, url=sqlite_url)
    assert again.returncode == 0 and "nothing to do" in again.stdout
    assert len(asyncio.run(_payouts(desk, ticket_id))) == 1


async def _open_five_and_strand_one(desk: TestDesk) -> tuple[list[str], str]:
    try:
        ledger = desk.ledger
        pending = [t.id for t in await open_tickets(ledger, 5, "cli")]
        [stuck] = await open_tickets(ledger, 1, "stuck")
        await decided_not_delivered(ledger, stuck.id, "conversation stuck-0 of dave is not in the app's database")
        return pending, stuck.id
    finally:
        await desk.close()


def test_inbox_pages_through_pending_tickets_and_lists_undelivered_decisions(desk, sqlite_url):
    pending, stuck = asyncio.run(_open_five_and_strand_one(desk))

    first = cli.expenses("inbox", "--limit", "2", url=sqlite_url)
    middle = cli.expenses("inbox", "--limit", "2", "--offset", "2", url=sqlite_url)
    last = cli.expenses("inbox", "--limit", "2", "--offset", "4", url=sqlite_url)

    listed = [re.findall(r"^(T-[0-9a-f]{12}) +dave ", page.stdout, re.M) for page in (first, middle, last)]
    assert listed == [pending[:2], pending[2:4], pending[4:]], [page.stdout for page in (first, middle, last)]
    assert "Pending: showing 1–2 of 5" in first.stdout and "showing 3–4 of 5" in middle.stdout
    assert f"{EXPENSES} inbox --offset 2 --limit 2" in first.stdout
    assert "showing 5–5 of 5" in last.stdout and "Next page" not in last.stdout
    # Decided, not delivered: listed with when the attempt failed and why, whatever the page.
    for page in (first, last):
        failed_at = r"\d{4}-\d\d-\d\d \d\d:\d\d"
        assert re.search(rf"^{stuck} +approved +bob +{failed_at} +conversation stuck-0 of dave is not in",
                         page.stdout, re.M), page.stdout
    assert f"{EXPENSES} deliver" in first.stdout
    beyond = cli.expenses("inbox", "--offset", "50", url=sqlite_url)
    assert beyond.returncode == 0 and "there are 5" in beyond.stdout and "--offset 0" in beyond.stdout


@pytest.mark.parametrize("args", [["--limit", "0"], ["--limit", "201"], ["--offset", "-1"], ["--limit", "ten"]])
def test_inbox_refuses_a_page_that_is_not_one(sqlite_url, args):
    result = cli.expenses("inbox", *args, url=sqlite_url)
    assert result.returncode == 2 and f"argument {args[0]}:" in result.stderr and result.stdout == ""


def test_a_decision_whose_conversation_was_deleted_is_settled_by_an_approver(desk, sqlite_url):
    ticket_id = cli.request_ticket(sqlite_url)

    async def delete_conversation() -> None:
        ticket = await desk.ledger.tickets.get(ticket_id)
        await desk.sessions.delete_session(app_name=ticket.app_name, user_id=ticket.user_id,
                                           session_id=ticket.session_id)
        await desk.close()

    early = cli.expenses("settle", ticket_id, "--approver", "bob", url=sqlite_url)
    assert early.returncode == 1 and "still pending" in early.stderr
    assert f"{EXPENSES} approve {ticket_id}" in early.stderr and "deliver" not in early.stderr
    asyncio.run(delete_conversation())

    approved = cli.expenses("approve", ticket_id, "--approver", "bob", url=sqlite_url)
    assert approved.returncode == 3, (approved.stdout, approved.stderr)
    assert f"{EXPENSES} settle {ticket_id}" in approved.stderr

    settled = cli.expenses("settle", ticket_id, "--approver", "carol", url=sqlite_url)

    assert settled.returncode == 0, settled.stderr
    assert "paid $250.00" in settled.stdout and "without the conversation" in settled.stdout
    assert len(asyncio.run(_payouts(desk, ticket_id))) == 1
    again = cli.expenses("settle", ticket_id, "--approver", "carol", url=sqlite_url)
    assert again.returncode == 1 and "already settled" in again.stderr


@pytest.mark.subprocess
def test_a_database_that_cannot_be_reached_is_one_line_that_says_what_to_check():
    closed = f"postgresql+asyncpg://postgres:secret@127.0.0.1:{free_port()}/expenses"

    result = run("inbox", url=closed)

    assert result.returncode == 1 and "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: the database postgresql+asyncpg://postgres:***@127.0.0.1:")
    assert "Check EXPENSES_DATABASE_URL" in line and "secret" not in line


@pytest.mark.subprocess
def test_a_reader_that_stops_early_ends_the_command_quietly_not_as_a_database_error(sqlite_url):
    ticket_id = cli.request_ticket(sqlite_url)
    shown = start("show", ticket_id, url=sqlite_url)
    assert shown.stdout is not None and shown.stderr is not None
    shown.stdout.close()  # as `| head` does once it has its lines

    said = shown.stderr.read()
    assert shown.wait(timeout=60) == 141, said  # the shell's status for a pipe its reader closed
    assert said == ""
