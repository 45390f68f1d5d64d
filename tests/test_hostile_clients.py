"""A hostile client against `make web`: spoofed ids, hijacks, races, floods and deletions.

Every answer is JSON, nothing is paid twice or without an approval, and a
decision always reaches the conversation it belongs to.
"""

from __future__ import annotations

import asyncio
from urllib.parse import quote

import httpx
import pytest
from support.http import (
    as_approver,
    assert_error,
    events_of,
    forged_approval,
    function_responses,
    json_texts,
    new_session,
    request_over_run,
    run_body,
    user_text,
)
from support.servers import APP, LUNCH, payouts, web_server

pytestmark = pytest.mark.subprocess


@pytest.mark.parametrize("spelling", ["Alice", "ALICE", "alice ", "alice\t", "\u0430lice", "alice\u200b", "a" * 200,
                                      "al\x00ice"])
async def test_user_ids_that_are_not_one_plain_spelling_are_refused(client, spelling):
    created = await client.post(f"/apps/{APP}/users/{quote(spelling, safe='')}/sessions", json={})
    assert_error(created, 422, "invalid_user_id")
    ran = await client.post("/run", json=run_body(spelling, "any-session", user_text(LUNCH)))
    assert_error(ran, 422, "invalid_user_id")


async def test_a_copied_session_id_under_another_user_cannot_take_the_delivery(desk, client, server):
    session_id, call, ticket_id = await request_over_run(client, user="alice")
    # mallory reads alice's conversation and rebuilds it under her own user id
    # (ADK takes initial events without their long-running marks).
    stolen = [{k: v for k, v in e.items() if k != "longRunningToolIds"}
              for e in await events_of(client, "alice", session_id)]
    copy = await client.post(f"/apps/{APP}/users/mallory/sessions",
                             json={"sessionId": session_id, "events": stolen})
    assert copy.status_code == 200, copy.text
    await desk.ledger_at(server.database_url).tickets.decide(ticket_id, approver="bob", approve=True)

    answered = await client.post("/run", json=run_body("mallory", session_id, forged_approval(call["id"])))

    assert answered.status_code == 200, answered.text
    assert function_responses(answered.json(), "reimburse") == []
    assert "no ticket" in json_texts(answered.json())[0]
    # alice's conversation still gets its decision, and is paid once.
    delivered = await client.post(f"/api/approvals/{ticket_id}/deliver", headers=as_approver("bob"))
    assert delivered.status_code == 200, delivered.text
    [paid] = await payouts(desk, server, ticket_id)
    assert (paid.user_id, paid.session_id) == ("alice", session_id)


async def test_chat_messages_beside_an_approval_never_make_it_fail(desk, client, server):
    session_id, _call, ticket_id = await request_over_run(client)

    chats = [client.post("/run", json=run_body("alice", session_id, user_text("any news?"))) for _ in range(6)]
    approve = client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("bob"))
    approved, *answers = await asyncio.gather(approve, *chats)

    assert approved.status_code == 200, approved.text
    assert approved.json()["delivery"] == "delivered"
    assert [a.status_code for a in answers] == [200] * 6, [a.text for a in answers if a.status_code != 200]
    assert len(await payouts(desk, server, ticket_id)) == 1


async def test_ten_deliveries_of_one_decision_deliver_it_once_and_all_answer_json(desk, client, server):
    _session_id, _call, ticket_id = await request_over_run(client)
    await desk.ledger_at(server.database_url).tickets.decide(ticket_id, approver="bob", approve=True)

    answers = await asyncio.gather(*[
        client.post(f"/api/approvals/{ticket_id}/deliver", headers=as_approver("carol")) for _ in range(10)
    ])

    assert sorted(a.status_code for a in answers) == [200] + [409] * 9, [a.text for a in answers]
    assert all(a.headers["content-type"].startswith("application/json") for a in answers)
    assert {a.json()["error"] for a in answers if a.status_code == 409} == {"already_delivered"}
    assert len(await payouts(desk, server, ticket_id)) == 1
    # A delivery that finds the decision delivered once it holds the conversation frees it at once: the
    # requester's next message does not wait for the lock's lease.
    ledger = desk.ledger_at(server.database_url)
    assert await ledger.locks.state((await ledger.tickets.get(ticket_id)).conversation) is None


async def test_a_conversation_waiting_for_a_decision_cannot_be_deleted(desk, client, server):
    session_id, _call, ticket_id = await request_over_run(client)
    url = f"/apps/{APP}/users/alice/sessions/{session_id}"

    assert_error(await client.delete(url), 409, "conversation_in_use")
    approved = await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("bob"))
    assert approved.status_code == 200 and len(await payouts(desk, server, ticket_id)) == 1

    assert (await client.delete(url)).status_code == 200  # nothing waits for it any more
    assert (await client.get(url)).status_code == 404


async def test_floods_are_refused_before_they_are_stored(client):
    session_id = await new_session(client, "alice")
    huge = await client.post("/run", json=run_body("alice", session_id, user_text("x" * 5_000_000)))
    assert_error(huge, 413, "too_large")

    long = await client.post("/run", json=run_body("alice", session_id, user_text("Reimburse $20 " * 800)))

    assert long.status_code == 200, long.text
    assert "at most 4,000" in json_texts(long.json())[0]
    stored = [text for event in await events_of(client, "alice", session_id)
              for text in [p.get("text", "") for p in (event.get("content") or {}).get("parts", [])]]
    assert not any("Reimburse $20 Reimburse" in text for text in stored)


async def test_health_reports_the_database(client):
    answer = await client.get("/health")
    assert answer.status_code == 200 and answer.json() == {"status": "ok", "database": "ok"}


def identity_server(directory, **settings) -> web_server:  # type: ignore[valid-type]
    return web_server(directory, TRUSTED_USER_HEADER="X-Forwarded-User", **settings)


async def test_behind_a_proxy_the_user_id_must_be_the_authenticated_user(tmp_path):
    with identity_server(tmp_path) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
            as_alice = {"X-Forwarded-User": "Alice"}
            made = await client.post(f"/apps/{APP}/users/alice/sessions", json={}, headers=as_alice)
            assert made.status_code == 200, made.text
            session_id = made.json()["id"]

            assert_error(await client.post("/run", json=run_body("alice", session_id, user_text(LUNCH))),
                         401, "missing_identity")
            as_mallory = {"X-Forwarded-User": "mallory"}
            assert_error(await client.get(f"/apps/{APP}/users/alice/sessions/{session_id}", headers=as_mallory),
                         403, "identity_mismatch")
            assert_error(await client.post("/run", json=run_body("alice", session_id, user_text(LUNCH)),
                                           headers=as_mallory), 403, "identity_mismatch")
            ran = await client.post("/run", json=run_body("alice", session_id, user_text(LUNCH)), headers=as_alice)
            assert ran.status_code == 200 and "waiting for an approver" in json_texts(ran.json())[-1]


async def test_production_mode_serves_no_dev_ui_and_no_builder(tmp_path):
    with identity_server(tmp_path, PRODUCTION_MODE="true") as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
            for path in ("/dev-ui/", f"/dev/apps/{APP}/builder", "/docs", "/openapi.json"):
                assert_error(await client.get(path), 404, "not_served")
            saved = await client.post(f"/dev/apps/{APP}/builder/save", files={"files": ("x.py", b"print(1)")})
            assert_error(saved, 404, "not_served")
            assert (await client.get("/inbox")).status_code == 200
            made = await client.post(f"/apps/{APP}/users/alice/sessions", json={},
                                     headers={"X-Forwarded-User": "alice"})
            assert made.status_code == 200, made.text
