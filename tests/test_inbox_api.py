"""GET /api/approvals hides nothing: pending tickets page by page with their total, every
decision that has not reached its conversation, and the inbox's security headers.

Against a real server (`python -m long_running_agent.web` on 127.0.0.1); the
tickets are made straight in its ledger. Other tests in this module add
tickets too, so each test checks its pages against the ledger itself.
"""

from __future__ import annotations

import httpx
import pytest
from support.http import as_approver, assert_error, request_over_run
from support.servers import payouts
from support.tickets import decide_and_mark_delivered, decided_not_delivered, open_ticket_for, open_tickets

pytestmark = pytest.mark.subprocess


async def inbox(client: httpx.AsyncClient, **query: int) -> dict:
    answer = await client.get("/api/approvals", params=query, headers=as_approver("bob"))
    assert answer.status_code == 200, answer.text
    return answer.json()


async def test_pending_tickets_come_page_by_page_with_their_total(desk, client, server):
    ledger = desk.ledger_at(server.database_url)
    opened = await open_tickets(ledger, 7, "paged")
    everything = [t.id for t in await ledger.tickets.with_status(limit=200)]
    assert len(everything) >= 7

    pages, offset = [], 0
    while offset is not None:
        page = await inbox(client, limit=3, offset=offset)
        assert page["total_pending"] == len(everything)
        assert page["pending_page"]["offset"] == offset and page["pending_page"]["limit"] == 3
        assert page["pending_page"]["previous_offset"] == (None if offset == 0 else offset - 3)
        pages.append([t["id"] for t in page["pending"]])
        offset = page["pending_page"]["next_offset"]

    assert len(pages) == -(-len(everything) // 3) >= 3
    assert [ticket_id for page in pages for ticket_id in page] == everything
    assert everything[-7:] == [t.id for t in opened]  # oldest first: the newest come last
    past_the_end = await inbox(client, limit=3, offset=len(everything))
    assert past_the_end["pending"] == [] and past_the_end["total_pending"] == len(everything)
    assert past_the_end["pending_page"]["next_offset"] is None
    # Without parameters: the first 50, as before.
    default = await inbox(client)
    assert default["pending_page"] == {"offset": 0, "limit": 50, "next_offset": None, "previous_offset": None}


@pytest.mark.parametrize("query", [
    "limit=0", "limit=201", "limit=-1", "limit=ten", "limit=", "limit=2.5", "limit=1e3", "limit=%EF%BC%95",
    "offset=-1", "offset=x", "offset=99999999999999", "undelivered_limit=0", "undelivered_offset=-5",
    "page=2", "limit=5&limit=6",
])
async def test_bad_paging_parameters_are_a_json_422_with_the_fix(client, query):
    answer = await client.get(f"/api/approvals?{query}", headers=as_approver("bob"))

    body = assert_error(answer, 422, "invalid_query")
    assert query.split("=")[0] in body["message"] and "offset" in body["fix"]


@pytest.mark.parametrize("query", ["limit=0", "limit=5&limit=6", "page=2"])
async def test_paging_parameters_are_checked_only_for_approvers(client, query):
    assert_error(await client.get(f"/api/approvals?{query}"), 401, "missing_token")


async def test_an_old_undelivered_decision_is_listed_with_why_beyond_the_recent_ten(desk, client, server):
    ledger = desk.ledger_at(server.database_url)
    old, other = await open_tickets(ledger, 2, "stuck")
    await decided_not_delivered(ledger, old.id, "conversation stuck-0 of dave is not in the app's database")
    await decided_not_delivered(ledger, other.id, "ConnectError: the model could not be reached")
    await decide_and_mark_delivered(ledger, 11)

    listed = await inbox(client)

    assert old.id not in [t["id"] for t in listed["recent_decisions"]] and len(listed["recent_decisions"]) == 10
    undelivered = {t["id"]: t for t in listed["undelivered"]}
    assert undelivered[old.id]["status"] == "approved" and undelivered[old.id]["delivered_at"] is None
    assert undelivered[old.id]["delivery_error"] == "conversation stuck-0 of dave is not in the app's database"
    assert listed["total_undelivered"] == await ledger.deliveries.count_undelivered() >= 2
    # The undelivered list pages on its own, oldest decision first.
    total = listed["total_undelivered"]
    first = await inbox(client, undelivered_limit=1)
    last = await inbox(client, undelivered_limit=1, undelivered_offset=total - 1)
    assert [t["id"] for t in first["undelivered"]] == [listed["undelivered"][0]["id"]]
    assert first["undelivered_page"]["next_offset"] == 1
    assert [t["id"] for t in last["undelivered"]] == [other.id] and last["undelivered_page"]["next_offset"] is None
    assert len(first["pending"]) == min(50, first["total_pending"])  # the pending page is not affected


async def test_a_delivered_decision_leaves_the_undelivered_list(desk, client, server):
    ledger = desk.ledger_at(server.database_url)
    _session_id, _call, ticket_id = await request_over_run(client)
    await decided_not_delivered(ledger, ticket_id, "the server stopped while delivering it")
    assert ticket_id in [t["id"] for t in (await inbox(client, undelivered_limit=200))["undelivered"]]

    delivered = await client.post(f"/api/approvals/{ticket_id}/deliver", headers=as_approver("carol"))

    assert delivered.status_code == 200, delivered.text
    listed = await inbox(client, undelivered_limit=200)
    assert ticket_id not in [t["id"] for t in listed["undelivered"]]
    assert [t["delivered_at"] is not None for t in listed["recent_decisions"] if t["id"] == ticket_id] == [True]
    assert len(await payouts(desk, server, ticket_id)) == 1


async def test_a_failed_delivery_is_listed_with_when_and_why_and_can_be_settled(desk, client, server):
    ledger = desk.ledger_at(server.database_url)
    # A conversation kept in a session database nobody listens for (port 1 on loopback).
    ticket = await open_ticket_for(ledger, 25_000, user="dave", session="unreadable-store", purpose="team lunch",
                                   session_store="database:postgresql+asyncpg://nobody@127.0.0.1:1/sessions")

    approved = await client.post(f"/api/approvals/{ticket.id}/approve", headers=as_approver("bob"))

    assert approved.status_code == 202, approved.text
    assert approved.json()["delivery_error"]["error"] in ("delivery_failed", "conversation_unreachable")
    [failure] = [e for e in await ledger.tickets.audit(ticket.id) if e.action == "undelivered"]
    failed_at = failure.at.isoformat(timespec="seconds")
    listed = {t["id"]: t for t in (await inbox(client, undelivered_limit=200))["undelivered"]}
    shown = (await client.get(f"/api/approvals/{ticket.id}", headers=as_approver("bob"))).json()["ticket"]
    for view in (approved.json()["ticket"], listed[ticket.id], shown):
        assert (view["delivery_error"], view["delivery_failed_at"]) == (failure.detail, failed_at)

    settled = await client.post(f"/api/approvals/{ticket.id}/settle", headers=as_approver("carol"))

    assert settled.status_code == 200, settled.text
    assert [(p["ticket_id"], p["amount"]) for p in settled.json()["payouts"]] == [(ticket.id, 250.0)]


SECURITY_HEADERS = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


def security_headers(response: httpx.Response) -> dict[str, str | None]:
    return {name: response.headers.get(name) for name in SECURITY_HEADERS}


def policy(response: httpx.Response) -> dict[str, str]:
    """The Content-Security-Policy as {directive: sources}."""
    directives = (d.strip().split(" ", 1) for d in response.headers["content-security-policy"].split(";"))
    return {d[0]: d[1] if len(d) > 1 else "" for d in directives}


async def test_the_inbox_page_sends_security_headers_and_loads_only_its_own_files(client):
    page = await client.get("/inbox")
    script, styles = await client.get("/inbox/inbox.js"), await client.get("/inbox/inbox.css")

    assert page.status_code == 200 and security_headers(page) == SECURITY_HEADERS
    csp = policy(page)
    assert csp["default-src"] == "'none'" and csp["frame-ancestors"] == "'none'"
    assert csp["script-src"] == "'self'" and csp["style-src"] == "'self'" and csp["connect-src"] == "'self'"
    assert "unsafe" not in page.headers["content-security-policy"]
    # Nothing inline for the policy to refuse: the script and styles are files of their own.
    assert "<script>" not in page.text and "<style>" not in page.text and "style=" not in page.text
    assert '<script src="/inbox/inbox.js"' in page.text and 'href="/inbox/inbox.css"' in page.text
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert styles.status_code == 200 and styles.headers["content-type"].startswith("text/css")
    assert security_headers(script) == security_headers(styles) == SECURITY_HEADERS
    assert policy(script) == policy(styles) == csp


async def test_the_api_sends_security_headers_on_answers_and_refusals(client):
    answers = [
        await client.get("/api/approvals", headers=as_approver("bob")),
        await client.get("/api/approvals"),  # 401
        await client.get("/api/approvals?limit=0", headers=as_approver("bob")),  # 422
        await client.get("/api/approvals/T-000000000000", headers=as_approver("bob")),  # 404
    ]
    for answer in answers:
        assert security_headers(answer) == SECURITY_HEADERS, answer.headers
        assert policy(answer) == {"default-src": "'none'", "frame-ancestors": "'none'"}
        assert answer.headers["cache-control"] == "no-store"
    # ADK's dev UI is served as ADK serves it: this policy would break it.
    assert "content-security-policy" not in (await client.get("/dev-ui/")).headers
