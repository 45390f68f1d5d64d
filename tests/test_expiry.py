"""An expired ticket reaches its conversation by itself, once.

While `make web` runs, its sweep expires overdue tickets and delivers the
expiry; without a server, the requester's next message or any approver
command does. Tickets are made overdue by moving their deadline into the
past, not by waiting.
"""

from __future__ import annotations

import asyncio
import re
import time
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import update
from support import cli
from support.conversation import event_texts, request_large
from support.desks import TestDesk
from support.http import as_approver, function_responses, request_over_run
from support.servers import APP, web_server

from long_running_agent.delivery.sweep import deliver_due
from long_running_agent.ledger import TicketStatus
from long_running_agent.ledger.storage.schema import TicketRow
from long_running_agent.names import Outcome


async def make_overdue(desk: TestDesk, url: str, ticket_id: str) -> None:
    ledger = desk.ledger_at(url)
    async with await ledger.database.session() as db, db.begin():
        await db.execute(update(TicketRow).where(TicketRow.id == ticket_id)
                         .values(expires_at=ledger.now() - timedelta(minutes=1)))


async def test_the_requesters_next_message_delivers_an_expiry_first(desk, db_url):
    _runner, chat, _events, _call, pending = await request_large(desk, db_url)
    await make_overdue(desk, db_url, pending["ticket_id"])

    reply = await chat.say("any news?")

    ticket = await desk.ledger.tickets.get(pending["ticket_id"])
    assert ticket.status == TicketStatus.EXPIRED and ticket.delivered_at is not None
    assert "expired" in event_texts(reply)[-1]
    actions = [e.action for e in await desk.ledger.tickets.audit(ticket.id)]
    assert actions == ["requested", "expired", "delivered"]


async def test_the_sweep_delivers_expiries_and_stalled_decisions_but_not_fresh_ones(desk, sqlite_url):
    _r, _c, _e, _call, overdue = await request_large(desk, sqlite_url)
    _r, _c, _e, _call, fresh = await request_large(desk, sqlite_url)
    ledger = desk.ledger
    await make_overdue(desk, sqlite_url, overdue["ticket_id"])
    # Just decided: its approver's own delivery is presumably under way.
    await ledger.tickets.decide(fresh["ticket_id"], approver="bob", approve=True)

    deliveries = await deliver_due(desk, actor="sweep")

    assert [(d.ticket.id, d.outcome) for d in deliveries] == [(overdue["ticket_id"], Outcome.DELIVERED)]
    assert (await ledger.tickets.get(fresh["ticket_id"])).delivered_at is None
    # Later, a decision whose delivery never happened (its process died) is delivered too.
    later = await deliver_due(desk, actor="sweep", grace=timedelta(0))
    assert [(d.ticket.id, d.outcome) for d in later] == [(fresh["ticket_id"], Outcome.DELIVERED)]
    assert len(await ledger.payouts.find(ticket_id=fresh["ticket_id"])) == 1
    assert await deliver_due(desk, actor="sweep", grace=timedelta(0)) == []


def test_any_approver_command_delivers_an_expiry(desk, sqlite_url):
    ticket_id = cli.request_ticket(sqlite_url)

    async def overdue() -> None:
        await make_overdue(desk, sqlite_url, ticket_id)
        await desk.close()

    asyncio.run(overdue())

    inbox = cli.expenses("inbox", url=sqlite_url)

    assert inbox.returncode == 0, inbox.stderr
    assert f"delivered the expired decision on {ticket_id}" in inbox.stdout
    shown = cli.expenses("show", ticket_id, url=sqlite_url)
    assert re.search(r"^Delivered: \d{4}-", shown.stdout, re.M), shown.stdout


async def until_delivered(client: httpx.AsyncClient, ticket_id: str, timeout: float = 30) -> None:
    """Wait until the server shows the ticket delivered; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (await client.get(f"/api/approvals/{ticket_id}", headers=as_approver("bob"))).json()["ticket"][
            "delivered_at"]:
        assert time.monotonic() < deadline, f"{ticket_id} was not delivered within {timeout} s"
        await asyncio.sleep(0.2)


@pytest.mark.subprocess
async def test_make_web_delivers_an_expiry_by_itself_once_with_two_replicas(desk, tmp_path):
    database_url = f"sqlite+aiosqlite:///{tmp_path}/expenses.db"
    quick = {"EXPIRY_SWEEP_SECONDS": "1"}
    with web_server(tmp_path, database_url=database_url, name="a", **quick) as a, \
            web_server(tmp_path, database_url=database_url, name="b", **quick) as b:
        async with httpx.AsyncClient(base_url=a.base_url, timeout=60) as client:
            session_id, call, ticket_id = await request_over_run(client)
            await make_overdue(desk, database_url, ticket_id)
            await desk.close()
            await until_delivered(client, ticket_id)
            # The sweeps went on past it: a later expiry is delivered in turn, the first one not again.
            _session_id, _call, later = await request_over_run(client)
            await make_overdue(desk, database_url, later)
            await desk.close()
            await until_delivered(client, later)

            shown = (await client.get(f"/api/approvals/{ticket_id}", headers=as_approver("bob"))).json()
            events = (await client.get(f"/apps/{APP}/users/alice/sessions/{session_id}")).json()["events"]
    actions = [entry["action"] for entry in shown["audit"]]
    assert actions == ["requested", "expired", "delivered"], (actions, a.log.read_text()[-2000:],
                                                               b.log.read_text()[-2000:])
    delivered = [r for author, r in function_responses(events, "ask_for_approval") if author == "user"]
    assert [(r["id"], r["response"]["status"]) for r in delivered] == [(call["id"], "expired")]
