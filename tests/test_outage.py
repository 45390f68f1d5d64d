"""A PostgreSQL outage under `make web`: honest answers while it lasts, nothing lost after."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from support.desks import TestDesk
from support.http import as_approver, assert_error, request_over_run, run_body, user_text
from support.postgres import new_postgres_database, postgres_cluster
from support.servers import APP, payouts, web_server

pytestmark = [pytest.mark.postgres, pytest.mark.subprocess]


async def wait_for_health(client: httpx.AsyncClient, status: int, timeout: float = 30) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        answer = await client.get("/health")
        if answer.status_code == status or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.5)


def test_an_outage_is_reported_honestly_and_the_decision_goes_through_after_it(desk, tmp_path):
    with postgres_cluster() as postgres:
        database_url = new_postgres_database(postgres.admin_url)
        with web_server(tmp_path, database_url=database_url) as server:
            asyncio.run(outage(desk, server, postgres))


async def outage(desk: TestDesk, server, postgres) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
        session_id, _call, ticket_id = await request_over_run(client)

        postgres.stop()
        down = await wait_for_health(client, 503)
        assert down.json()["database"].startswith("unreachable"), down.text
        approve = await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("bob"))
        refusal = assert_error(approve, 503, "database_unavailable")
        assert "cannot tell whether the decision" in refusal["message"]
        assert approve.headers["retry-after"]
        chat = await client.post("/run", json=run_body("alice", session_id, user_text("any news?")))
        assert_error(chat, 503, "database_unavailable")
        # ADK's own routes too, and without the SQL SQLAlchemy puts in its errors.
        created = await client.post(f"/apps/{APP}/users/alice/sessions", json={})
        assert_error(created, 503, "database_unavailable")
        read = await client.get(f"/apps/{APP}/users/alice/sessions/{session_id}")
        assert_error(read, 503, "database_unavailable")
        streamed = await client.post("/run_sse", json=run_body("alice", session_id, user_text("any news?")))
        for answer in (approve, chat, created, read, streamed):
            assert "[SQL:" not in answer.text and "sqlalchemy" not in answer.text, answer.text

        postgres.start()
        assert (await wait_for_health(client, 200)).status_code == 200
        approve = await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("bob"))

        assert approve.status_code == 200, approve.text
        assert approve.json()["delivery"] == "delivered"
        assert len(await payouts(desk, server, ticket_id)) == 1
        await desk.close()
