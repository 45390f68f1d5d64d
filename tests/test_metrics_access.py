"""Who may read GET /metrics (make web's server, in this process): open in development, off in production
unless METRICS_TOKEN is set, and then only with it; and what a refused decision counts (nothing)."""

from __future__ import annotations

import pytest
from support.http import as_approver, request_over_run
from support.scrape import scrape
from support.servers import TOKENS, in_process

TOKEN = "metrics-token-for-tests"
APPROVERS = {token: name for name, token in TOKENS.items()}


async def test_a_development_server_serves_metrics_to_anyone(desk, configure):
    configure()
    async with in_process(desk) as client:
        assert (await scrape(client))("expenses_pending_tickets") == 0


@pytest.mark.parametrize("token", [None, TOKEN])
async def test_production_serves_metrics_only_behind_metrics_token(desk, configure, token):
    configure(production=True, trusted_user_header="X-Forwarded-User", metrics_token=token)
    async with in_process(desk) as client:
        plain = await client.get("/metrics")
        if token is None:
            assert plain.status_code == 404 and plain.json()["error"] == "not_served"
            return
        assert plain.status_code == 401 and plain.json()["fix"]
        assert (await scrape(client, {"Authorization": f"Bearer {TOKEN}"}))("expenses_pending_tickets") == 0


async def test_a_refused_decision_counts_as_no_decision(desk, configure):
    configure(approvers=APPROVERS)
    async with in_process(desk) as client:
        _session_id, _call, ticket_id = await request_over_run(client, user="alice")
        before = await scrape(client)
        own = await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("alice"))
        assert own.status_code == 403 and own.json()["error"] == "not_allowed", own.text
        after = await scrape(client)
    assert [key for key in after.samples if key[0] == "expenses_decisions_total"] == []
    assert after("expenses_pending_tickets") == before("expenses_pending_tickets") == 1


def made_up(round_: int, count: int) -> list[tuple[str, str, dict[str, str]]]:
    """Requests a hostile client makes up: a method, a path and a token of its own each time."""
    paths = ("/api/approvals/T-{n}/approve", "/no-such-page-{n}", "/metrics", "/api/approvals", "/dev-ui/{n}")
    return [(f"MADE{round_}X{n}", paths[n % len(paths)].format(n=n), {"Authorization": f"Bearer made-up-{round_}-{n}"})
            for n in range(count)]


async def test_made_up_methods_paths_and_tokens_add_no_series(desk, configure):
    """Every label takes its values from a fixed set: once each kind of request was seen, more add no series."""
    configure(approvers=APPROVERS)
    async with in_process(desk) as client:
        for round_, count in ((1, 50), (2, 300)):
            for method, path, headers in made_up(round_, count):
                await client.request(method, path, headers=headers)
                await client.request("GET", path, headers=headers)
            series = set((await scrape(client)).samples)
            if round_ == 1:
                seen = series
    methods = {dict(labels).get("method") for name, labels in series if name.startswith("expenses_http")}
    assert series == seen, sorted(series - seen)
    assert "other" in methods and not any(m and m.startswith("MADE") for m in methods)
