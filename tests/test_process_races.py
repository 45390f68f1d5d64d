"""Decisions and payouts raced from three processes at once on one ledger, judged by the money invariants.

A real `make web` server and two worker processes that call the ledger directly (tests/support/race_worker.py) act
on the same tickets at the same moments, on a SQLite file and on PostgreSQL: approvals with and without an amount,
rejections, withdrawals, expiries as a window ends, deliveries, settlements and `reimburse` calls. The test records
what it asked for and what each process saw accepted, and judges the ledger's rows against that record alone
(tests/support/invariants.py). Then each requester asks once more, for what the two-person rule makes of the rest.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.invariants import Record, check_money_invariants
from support.processes import ROOT
from support.race_worker import read
from support.servers import TOKENS, web_server

from long_running_agent.ledger import Ledger

pytestmark = pytest.mark.subprocess

APP = "long_running_agent"
APPROVERS = frozenset(TOKENS)  # alice, bob and carol, as the server's APPROVERS names them
LINE = 500_000  # DUAL_APPROVAL_ABOVE's default, $5,000, in cents
# Alice and bob approve others' tickets too; each requester's day adds up toward the two-person rule.
REQUESTERS = ("alice", "bob", "erin", "frank", "grace", "heidi", "ivan", "judy", "niaj", "olivia")
AMOUNTS = (120_000, 200_000, 300_000, 450_000, 600_000)
ACTORS = ("http", "ledger-1", "ledger-2")
HTTP_OPS = {"approve", "reject", "settle", "deliver"}  # what the approvals API offers
TICKETS = 48
SLOT = 0.2  # seconds from one ticket's decisions to the next one's
LATER = 2  # slots from a ticket's decisions to its payouts
EXPIRING = 6  # every sixth ticket's window ends as its decisions come in
LONG = timedelta(hours=1)
PURPOSE = "team offsite"


def test_decisions_and_payouts_racing_in_three_processes_keep_the_money_invariants(db_url, tmp_path):
    rng, record = random.Random(), Record(APPROVERS, LINE)
    # No sweep of the server's own during the test: each expiry is one a process saw accepted, and recorded.
    with web_server(tmp_path, database_url=db_url, EXPIRY_SWEEP_SECONDS="3600") as server:
        workers = [_start(actor, db_url, server.base_url, tmp_path) for actor in ACTORS]
        try:
            for actor, worker in zip(ACTORS, workers, strict=True):
                assert worker.stdout is not None and worker.stdout.readline().strip() == "ready", _log(actor, tmp_path)
            start, steps = asyncio.run(_open_and_plan(db_url, record, rng))
            for worker in workers:
                assert worker.stdin is not None
                worker.stdin.write(json.dumps({"start": start, "steps": steps}) + "\n")
                worker.stdin.flush()
            for actor, worker in zip(ACTORS, workers, strict=True):
                assert worker.wait(timeout=120) == 0, _log(actor, tmp_path)
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.kill()
                    worker.wait()
        errors = []
        for actor in ACTORS:
            decisions, wrong = read(tmp_path / f"{actor}.jsonl")
            record.decisions += decisions
            errors += wrong
        assert not errors, "answers no user should get:\n" + "\n".join(errors)
        asyncio.run(_ask_again_and_check(db_url, record))
    log = server.log.read_text()
    assert "Traceback" not in log and " 500 " not in log, log[-3000:]


def _start(actor: str, db_url: str, base_url: str, tmp_path: Path) -> subprocess.Popen[str]:
    """A worker process: the project's package from ROOT, the tests' helpers from tests/."""
    target = {"actor": actor, "database_url": db_url, "base_url": base_url, "approvers": sorted(APPROVERS),
              "tokens": TOKENS}
    env = os.environ | {"PYTHONPATH": str(ROOT / "tests")}
    with (tmp_path / f"{actor}.log").open("w") as log:
        return subprocess.Popen([sys.executable, "-m", "support.race_worker", json.dumps(target),
                                 str(tmp_path / f"{actor}.jsonl")], cwd=ROOT, env=env, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)


def _log(actor: str, tmp_path: Path) -> str:
    return f"the {actor} worker failed:\n{(tmp_path / f'{actor}.log').read_text()[-3000:]}"


async def _open_and_plan(db_url: str, record: Record, rng: random.Random) -> tuple[float, list[dict[str, Any]]]:
    """Open the tickets, recording each, and plan what the three processes do to them, and when."""
    ledger = Ledger(db_url, approvers=APPROVERS)
    asked = [(rng.choice(REQUESTERS), rng.choice(AMOUNTS)) for _ in range(TICKETS)]
    expiring = {i for i in range(TICKETS) if i % EXPIRING == EXPIRING - 1}
    opened: dict[int, tuple[str, list[str]]] = {}
    try:
        for i, (requester, cents) in enumerate(asked):
            if i not in expiring:
                opened[i] = await _open(ledger, record, requester, cents, LONG)
        # The rest last, with windows that end at their ticket's moment in the plan.
        start = time.time() + 0.5
        for i in sorted(expiring):
            requester, cents = asked[i]
            opened[i] = await _open(ledger, record, requester, cents, timedelta(seconds=start + i * SLOT - time.time()))
    finally:
        await ledger.close()
    steps = []
    for i, (ticket_id, conversation) in sorted(opened.items()):
        at = record.requests[ticket_id].window_ends[1].timestamp() - start if i in expiring else i * SLOT
        steps += _decisions(ticket_id, record, rng, at, expiring=i in expiring)
        steps += _payouts(ticket_id, conversation, record, rng, at=(i + LATER + 0.5) * SLOT)
    return start, steps


async def _open(ledger: Ledger, record: Record, requester: str, cents: int, ttl: timedelta) -> tuple[str, list[str]]:
    """Open a ticket in a conversation of its own and record it; returns its id and conversation."""
    conversation = [APP, requester, f"race-{len(record.requests)}"]
    began = datetime.now(UTC)
    ticket = await ledger.tickets.open(
        app_name=APP, user_id=requester, session_id=conversation[2], call_id="call-1", call_name="ask_for_approval",
        purpose=PURPOSE, amount_cents=cents, ttl=ttl)
    record.request(ticket.id, requester, began, datetime.now(UTC), cents, ttl)
    return ticket.id, conversation


def _decisions(ticket_id: str, record: Record, rng: random.Random, at: float, *, expiring: bool
               ) -> list[dict[str, Any]]:
    """Three decisions at the same moment, one from each process: two approvals, and one more of anything
    (most often a third approval)."""
    asked = record.requests[ticket_id]
    amounts = [None, *(asked.cents * tenths // 10 for tenths in (9, 7, 5))]
    first, second, third = rng.sample(sorted(APPROVERS), 3)
    # Different amounts: whichever approval lands last must not raise what another approved.
    one, other, more = rng.sample(amounts, 3)
    anything = [
        {"op": "approve", "who": third, "cents": more},
        {"op": "approve", "who": first, "cents": more},  # the same approver again
        {"op": "approve", "who": asked.requester if asked.requester in APPROVERS else third, "cents": None},  # own
        {"op": "reject", "who": third},
        {"op": "withdraw", "who": asked.requester},
        {"op": "expire"},
    ]
    # Just after a window ended, the approvals may still find the ticket pending, or expired by the third.
    ops = [{"op": "approve", "who": first, "cents": one}, {"op": "approve", "who": second, "cents": other},
           rng.choices(anything, weights=(4, 2, 1, 2, 1, 4 if expiring else 1))[0]]
    return _at_once(ops, ticket_id, rng, at)


def _payouts(ticket_id: str, conversation: list[str], record: Record, rng: random.Random, at: float
             ) -> list[dict[str, Any]]:
    """Paying it at the same moment: a settlement or a delivery, another delivery, and the model's `reimburse`."""
    cents = record.requests[ticket_id].cents
    ops = [{"op": rng.choice(["settle", "deliver"]), "who": rng.choice(sorted(APPROVERS))},
           {"op": "deliver", "who": rng.choice(sorted(APPROVERS))},
           {"op": "reimburse", "cents": cents * rng.choice((10, 9, 7, 5)) // 10, "purpose": PURPOSE,
            "conversation": conversation}]
    return _at_once(ops, ticket_id, rng, at)


def _at_once(ops: list[dict[str, Any]], ticket_id: str, rng: random.Random, at: float) -> list[dict[str, Any]]:
    """One op per process, the server's one the API offers; up to 10 ms apart, so that the processes' reads and
    writes interleave differently each time."""
    by_http = rng.choice([op for op in ops if op["op"] in HTTP_OPS])
    rest = [op for op in ops if op is not by_http]
    rng.shuffle(rest)
    return [op | {"actor": actor, "ticket": ticket_id, "at": at + rng.uniform(0, 0.01)}
            for actor, op in zip(ACTORS, [by_http, *rest], strict=True)]


async def _ask_again_and_check(db_url: str, record: Record) -> None:
    """Each requester asks for what is left of their day under the line, then the check.

    What the rejected, withdrawn and expired requests leave decides whether it needs one approver or two.
    """
    ledger = Ledger(db_url, approvers=APPROVERS)
    try:
        for requester in REQUESTERS:
            left = LINE - record.asked(requester, datetime.now(UTC).date())
            await _open(ledger, record, requester, left if left > 0 else 150_000, LONG)
        await check_money_invariants(ledger, record)
    finally:
        await ledger.close()

