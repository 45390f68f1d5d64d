"""GET /metrics on a real `make web`, scraped after real flows: each figure moves as the flow did.

The database's figures (pending tickets, the oldest one's wait, today's payouts, the outbox) are read at each
scrape; the counters are this server's own. The server is shared by the module's tests, so each compares two
scrapes, before and after its own flow.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from support.http import as_approver, new_session, request_over_run
from support.processes import run
from support.scrape import Scrape, scrape
from support.servers import TOKENS
from support.tickets import open_ticket_for

pytestmark = pytest.mark.subprocess

APPROVE = "/api/approvals/{ticket_id}/approve"


def moved(before: Scrape, after: Scrape, name: str, **labels: str) -> float:
    return after(name, **labels) - before(name, **labels)


async def test_a_request_its_approval_and_payout_move_the_figures(client):
    before = await scrape(client)
    _session_id, _call, ticket_id = await request_over_run(client)
    asked = await scrape(client)
    approved = await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("bob"))
    assert approved.status_code == 200, approved.text
    after = await scrape(client)

    assert moved(before, asked, "expenses_pending_tickets") == 1
    assert asked("expenses_oldest_pending_seconds") > 0
    assert moved(asked, after, "expenses_pending_tickets") == -1
    assert moved(before, after, "expenses_decisions_total", outcome="approved", channel="api") == 1
    assert moved(before, after, "expenses_decision_seconds_count") == 1
    assert 0 < moved(before, after, "expenses_decision_seconds_sum") < 60
    assert moved(before, after, "expenses_payouts_total") == 1
    assert moved(before, after, "expenses_paid_dollars_total") == 250
    assert moved(before, after, "expenses_paid_today_dollars") == 250
    assert moved(before, after, "expenses_deliveries_failed_total") == 0
    for method, route in (("POST", "/run"), ("POST", APPROVE)):
        assert moved(before, after, "expenses_http_request_duration_seconds_count",
                     method=method, route=route, status="200") == 1


async def test_the_inbox_pages_rejection_counts_under_the_inbox_channel(client):
    _session_id, _call, ticket_id = await request_over_run(client)
    before = await scrape(client)
    rejected = await client.post(f"/api/approvals/{ticket_id}/reject", json={"reason": "no receipt"},
                                 headers=as_approver("carol") | {"X-Approval-Channel": "inbox"})
    assert rejected.status_code == 200, rejected.text
    after = await scrape(client)

    assert moved(before, after, "expenses_decisions_total", outcome="rejected", channel="inbox") == 1
    assert moved(before, after, "expenses_decisions_total", outcome="rejected", channel="api") == 0
    assert moved(before, after, "expenses_payouts_total") == moved(before, after, "expenses_paid_today_dollars") == 0


async def test_a_decision_that_cannot_reach_its_conversation_is_counted_then_settled_and_paid(desk, client, server):
    # A ticket whose conversation is not in the server's store (deleted since, say).
    ticket = await open_ticket_for(desk.ledger_at(server.database_url), 30_000, user="dave", session="s-deleted",
                                   purpose="monitor")
    before = await scrape(client)
    approved = await client.post(f"/api/approvals/{ticket.id}/approve", headers=as_approver("bob"))
    assert approved.status_code == 202, approved.text
    failed = await scrape(client)
    settled = await client.post(f"/api/approvals/{ticket.id}/settle", headers=as_approver("carol"))
    assert settled.status_code == 200, settled.text
    after = await scrape(client)

    assert moved(before, failed, "expenses_deliveries_failed_total") == 1
    assert moved(before, failed, "expenses_decisions_total", outcome="approved", channel="api") == 1
    assert moved(before, failed, "expenses_payouts_total") == 0
    assert moved(before, failed, "expenses_http_request_duration_seconds_count",
                 method="POST", route=APPROVE, status="202") == 1
    # The approver settles it: paid without the conversation, and counted as a payout.
    assert moved(failed, after, "expenses_payouts_total") == 1
    assert moved(failed, after, "expenses_paid_dollars_total") == moved(failed, after, "expenses_paid_today_dollars")
    assert moved(failed, after, "expenses_paid_dollars_total") == 300


async def test_a_cli_decision_moves_the_database_figures_but_no_servers_counters(client, server):
    _session_id, _call, ticket_id = await request_over_run(client)
    before = await scrape(client)
    approvers = ",".join(f"{name}:{token}" for name, token in TOKENS.items())
    done = await asyncio.to_thread(run, "approve", ticket_id, "--approver", "bob", url=server.database_url,
                                   env={"APPROVERS": approvers})
    assert done.returncode == 0, done.stderr
    after = await scrape(client)

    assert moved(before, after, "expenses_pending_tickets") == -1
    assert moved(before, after, "expenses_paid_today_dollars") == 250
    assert moved(before, after, "expenses_decisions_total", outcome="approved", channel="cli") == 0
    assert moved(before, after, "expenses_payouts_total") == 0


async def test_unknown_paths_count_as_unmatched_not_one_series_each(client):
    before = await scrape(client)
    for path in ("/no-such-page-1", "/no-such-page-2"):
        assert (await client.get(path)).status_code == 404
    after = await scrape(client)
    assert moved(before, after, "expenses_http_request_duration_seconds_count",
                 method="GET", route="unmatched", status="404") == 2
    assert not [key for key in after.samples if "no-such-page" in str(key)]


# --- a server with a webhook that never answers, METRICS_TOKEN and JSON logs ------------------------------

CLOSED_PORT = 1  # nothing listens there (only root may, and no test does): every webhook attempt fails at once
SCRAPER = {"Authorization": "Bearer metrics-token-for-tests"}
WATCHED = {"APPROVAL_WEBHOOK_URL": f"http://127.0.0.1:{CLOSED_PORT}/hook",
           "APPROVAL_WEBHOOK_SECRET": "webhook-secret-for-tests", "METRICS_TOKEN": "metrics-token-for-tests",
           "LOG_FORMAT": "json"}


@pytest.mark.parametrize("server", [WATCHED], indirect=True)
async def test_metrics_token_is_asked_for_when_set(client):
    refused = await client.get("/metrics")
    assert refused.status_code == 401 and refused.json()["error"] == "missing_token"
    assert (await client.get("/metrics", headers={"Authorization": "Bearer wrong-token"})).status_code == 401
    assert (await client.get("/metrics", headers=SCRAPER)).status_code == 200


@pytest.mark.parametrize("server", [WATCHED], indirect=True)
async def test_a_failing_webhook_shows_as_outbox_pending_and_failed_attempts(client):
    before = await scrape(client, SCRAPER)
    await request_over_run(client)
    for _ in range(100):  # the sender tries every 2 s
        after = await scrape(client, SCRAPER)
        if moved(before, after, "expenses_outbox_failed_total"):
            break
        await asyncio.sleep(0.2)
    assert moved(before, after, "expenses_outbox_failed_total") >= 1
    assert after("expenses_outbox_pending") >= 1  # retried later, not given up


@pytest.mark.parametrize("server", [WATCHED], indirect=True)
async def test_json_logs_are_one_object_per_line_uvicorns_included(client, server):
    await new_session(client, "alice")
    logged = [line for line in server.log.read_text().splitlines() if line.startswith("{")]
    records = [json.loads(line) for line in logged]
    assert {"uvicorn.error", "uvicorn.access"} <= {r["logger"] for r in records}
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    # What else the server wrote is its banner (print), not a log record.
    others = [line for line in server.log.read_text().splitlines() if line and not line.startswith("{")]
    banner = ("Model", "Database", "Policy", "Dev UI", "Inbox", "A2A", "Approvers")
    assert all(line.split(":")[0] in banner for line in others), others
