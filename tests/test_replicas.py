"""Replicas: several `python -m long_running_agent.web` on one PostgreSQL database, started together.

The first of them to start migrates the empty database and creates ADK's
session tables while holding the start-up lock; the others wait for it, then
find nothing left to do. After that, any replica serves any conversation, and
an approval sent to two replicas at the same moment pays once.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from support.desks import TestDesk
from support.http import as_approver, assert_resumed_once_and_paid, request_over_run
from support.postgres import new_postgres_database
from support.servers import web_servers

pytestmark = [pytest.mark.postgres, pytest.mark.subprocess]

CONVERSATIONS = 6


def test_two_replicas_started_together_on_an_empty_database_serve_and_pay_each_ticket_once(
        desk, tmp_path, postgres_admin_url):
    database_url = new_postgres_database(postgres_admin_url)

    with web_servers(tmp_path, 2, database_url=database_url) as replicas:
        asyncio.run(_alternate_and_race(desk, replicas))

    for replica in replicas:
        log = replica.log.read_text()
        assert "Traceback" not in log and " 500 " not in log, log[-3000:]


async def _alternate_and_race(desk: TestDesk, replicas) -> None:
    clients = [httpx.AsyncClient(base_url=r.base_url, timeout=120) for r in replicas]
    try:
        # The very first requests, on both replicas at once: sessions, ledger rows, locks.
        started = await asyncio.gather(*(request_over_run(clients[i % 2]) for i in range(CONVERSATIONS)))

        for i, (_session_id, _call, ticket_id) in enumerate(started):
            # Each ticket approved on both replicas at the same moment.
            answers = await asyncio.gather(
                clients[i % 2].post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("bob")),
                clients[(i + 1) % 2].post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("carol")),
            )
            statuses = sorted(a.status_code for a in answers)
            assert statuses == [200, 409], [a.text for a in answers]
            [refused] = [a for a in answers if a.status_code == 409]
            assert refused.json()["error"] == "already_decided", refused.text

        for i, (session_id, call, ticket_id) in enumerate(started):
            # Read back through the other replica than the one that started it.
            await assert_resumed_once_and_paid(desk, clients[(i + 1) % 2], replicas[(i + 1) % 2], "alice",
                                               session_id, call, ticket_id)
    finally:
        for client in clients:
            await client.aclose()
        await desk.close()
