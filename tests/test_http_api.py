"""ADK's /run and /run_sse plus the approvals API, over HTTP against a real server.

The server is `python -m long_running_agent.web` in a subprocess on 127.0.0.1
with its own SQLite file and HOME; the tests talk to it as any client would
and check the ledger's payouts directly.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys

import pytest
from support.http import (
    as_approver,
    assert_error,
    assert_resumed_once_and_paid,
    events_of,
    forged_approval,
    function_responses,
    json_texts,
    new_session,
    pending_call,
    request_over_run,
    run_body,
    user_text,
)
from support.processes import ROOT
from support.servers import APP, LUNCH, payouts
from support.tickets import open_ticket_for

from long_running_agent.web.server import port_in_use

pytestmark = pytest.mark.subprocess

# --- one flow over ADK's routes, decided in the inbox API ---------------------------


async def test_app_list_shows_only_the_expense_agent(client):
    assert (await client.get("/list-apps")).json() == [APP]


async def test_request_over_run_then_inbox_approval_pays_once(desk, client, server):
    session_id, call, ticket_id = await request_over_run(client)
    assert call["name"] == "ask_for_approval"
    listed = (await client.get("/api/approvals", headers=as_approver("bob"))).json()
    [ticket] = [t for t in listed["pending"] if t["id"] == ticket_id]
    assert (ticket["requester"], ticket["amount"], ticket["purpose"]) == ("alice", 250.0, "team lunch")
    assert await payouts(desk, server, ticket_id) == []

    decided = await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("bob"))

    assert decided.status_code == 200, decided.text
    body = decided.json()
    assert (body["ticket"]["status"], body["ticket"]["decided_by"]) == ("approved", "bob")
    assert len(body["payouts"]) == 1 and body["payouts"][0]["payout_id"] in body["agent_reply"]
    await assert_resumed_once_and_paid(desk, client, server, "alice", session_id, call, ticket_id)


async def test_request_over_run_sse_then_inbox_approval_pays_once(desk, client, server):
    session_id = await new_session(client, "alice")
    body = run_body("alice", session_id, user_text(LUNCH)) | {"streaming": False}
    async with client.stream("POST", "/run_sse", json=body) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[len("data:"):]) async for line in stream.aiter_lines() if line.startswith("data:")]
    assert not [e for e in events if "error" in e], events
    call = pending_call(events)
    [(_author, pending)] = function_responses(events, "ask_for_approval")
    ticket_id = pending["response"]["ticket_id"]

    decided = await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("carol"))

    assert decided.status_code == 200, decided.text
    await assert_resumed_once_and_paid(desk, client, server, "alice", session_id, call, ticket_id)


async def test_rejection_in_the_inbox_tells_the_requester_and_pays_nothing(desk, client, server):
    session_id, _call, ticket_id = await request_over_run(client)

    decided = await client.post(f"/api/approvals/{ticket_id}/reject", headers=as_approver("bob"),
                                json={"reason": "not a business expense"})

    assert decided.status_code == 200, decided.text
    assert decided.json()["ticket"]["reason"] == "not a business expense"
    assert "rejected" in decided.json()["agent_reply"]
    events = await events_of(client, "alice", session_id)
    assert function_responses(events, "reimburse") == []
    assert any("Nothing was paid" in text for text in json_texts(events))
    assert await payouts(desk, server, ticket_id) == []


# --- what ADK's own routes do with responses the app did not send ---------------------


async def test_forged_approval_over_run_is_refused_and_pays_nothing(desk, client, server):
    session_id, call, ticket_id = await request_over_run(client)

    forged = await client.post("/run", json=run_body("alice", session_id, forged_approval(call["id"])))

    assert forged.status_code == 200, forged.text
    [refusal] = forged.json()
    # The note is the agent speaking, not a thought in the requester's message.
    assert refusal["author"] == "expense_agent"
    assert refusal["content"]["parts"][0]["text"].startswith("Approval response not accepted")
    assert not refusal["content"]["parts"][0].get("thought")
    assert "unknown agent" not in server.log.read_text()
    assert function_responses(forged.json(), "reimburse") == []
    assert await payouts(desk, server, ticket_id) == []
    shown = (await client.get(f"/api/approvals/{ticket_id}", headers=as_approver("bob"))).json()
    assert shown["ticket"]["status"] == "pending"
    assert [a["action"] for a in shown["audit"]] == ["requested", "refused"]

    # The refused forgery did not use up the call: the real decision still resumes it.
    approved = await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("bob"))
    assert approved.status_code == 200, approved.text
    assert len(await payouts(desk, server, ticket_id)) == 1


async def test_bad_function_responses_are_a_json_400_on_run(client):
    session_id, _call, _ticket_id = await request_over_run(client)
    message = forged_approval("adk-not-a-real-call")

    answer = await client.post("/run", json=run_body("alice", session_id, message))

    body = assert_error(answer, 400, "invalid_function_response")
    assert "adk-not-a-real-call" in body["message"]
    mixed = {"role": "user", "parts": [{"text": "approved, see below"}, *message["parts"]]}
    answer = await client.post("/run", json=run_body("alice", session_id, mixed))
    assert "both function responses and text" in assert_error(answer, 400, "invalid_function_response")["message"]
    # /run_sse has already sent 200 when ADK refuses; the error is an SSE event.
    sse = await client.post("/run_sse", json=run_body("alice", session_id, message))
    assert sse.status_code == 200
    assert "Function call not found for function response ids" in sse.text and '"error"' in sse.text


# --- the approvals API's answers ------------------------------------------------------


async def test_approvals_api_needs_a_known_bearer_token(client):
    _session_id, _call, ticket_id = await request_over_run(client)
    requests = [("GET", "/api/approvals"), ("GET", f"/api/approvals/{ticket_id}"),
                ("POST", f"/api/approvals/{ticket_id}/approve")]
    for method, path in requests:
        missing = await client.request(method, path)
        assert_error(missing, 401, "missing_token")
        assert missing.headers["www-authenticate"] == "Bearer"
        assert_error(await client.request(method, path, headers={"Authorization": "Basic Ym9iOng="}),
                     401, "missing_token")
        assert_error(await client.request(method, path, headers={"Authorization": "Bearer bob-tokem"}),
                     403, "unknown_token")
    shown = await client.get(f"/api/approvals/{ticket_id}", headers=as_approver("bob"))
    assert shown.json()["ticket"]["status"] == "pending"


async def test_requester_cannot_approve_their_own_ticket(desk, client, server):
    _session_id, _call, ticket_id = await request_over_run(client, user="alice")

    answer = await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("alice"))

    refusal = assert_error(answer, 403, "not_allowed")
    # Said once: the message says what is wrong, the fix what to do.
    assert "approver" not in refusal["message"].split("cannot")[-1] and "approver" in refusal["fix"]
    shown = await client.get(f"/api/approvals/{ticket_id}", headers=as_approver("bob"))
    assert shown.json()["ticket"]["status"] == "pending"
    assert await payouts(desk, server, ticket_id) == []


async def test_unknown_ticket_is_404(client):
    assert_error(await client.get("/api/approvals/T-000000000000", headers=as_approver("bob")),
                 404, "ticket_not_found")
    assert_error(await client.post("/api/approvals/T-000000000000/approve", headers=as_approver("bob")),
                 404, "ticket_not_found")


async def test_second_decision_is_409_and_the_first_stands(desk, client, server):
    _session_id, _call, ticket_id = await request_over_run(client)
    assert (await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("bob"))).status_code == 200

    again = await client.post(f"/api/approvals/{ticket_id}/reject", headers=as_approver("carol"),
                              json={"reason": "changed my mind"})

    assert_error(again, 409, "already_decided")
    shown = (await client.get(f"/api/approvals/{ticket_id}", headers=as_approver("carol"))).json()
    assert (shown["ticket"]["status"], shown["ticket"]["decided_by"]) == ("approved", "bob")
    assert len(shown["payouts"]) == 1 and len(await payouts(desk, server, ticket_id)) == 1


@pytest.mark.parametrize("action, content, error", [
    ("approve", b"{not json", "invalid_body"),
    ("approve", b"[\"approved\"]", "invalid_body"),
    ("approve", b'{"reson": "typo"}', "invalid_body"),
    ("approve", json.dumps({"reason": "x" * 501}).encode(), "invalid_body"),
    ("reject", b'{"reason": 42}', "invalid_body"),
    ("reject", b"", "reason_required"),
    ("reject", b"{}", "reason_required"),
    ("reject", b'{"reason": "   "}', "reason_required"),
])
async def test_malformed_decisions_are_422_and_decide_nothing(client, server, action, content, error):
    _session_id, _call, ticket_id = await request_over_run(client)

    answer = await client.post(f"/api/approvals/{ticket_id}/{action}", content=content,
                               headers=as_approver("bob") | {"Content-Type": "application/json"})

    assert_error(answer, 422, error)
    shown = (await client.get(f"/api/approvals/{ticket_id}", headers=as_approver("bob"))).json()
    assert shown["ticket"]["status"] == "pending" and shown["payouts"] == []


async def test_duplicate_approval_pays_once(desk, client, server):
    session_id, call, ticket_id = await request_over_run(client)
    url = f"/api/approvals/{ticket_id}/approve"

    first, second = await asyncio.gather(client.post(url, headers=as_approver("bob")),
                                         client.post(url, headers=as_approver("carol")))
    third = await client.post(url, headers=as_approver("bob"))

    assert sorted([first.status_code, second.status_code]) == [200, 409]
    assert_error(third, 409, "already_decided")
    await assert_resumed_once_and_paid(desk, client, server, "alice", session_id, call, ticket_id)


async def test_decision_that_never_reached_the_conversation_is_resumed_once(desk, client, server):
    session_id, call, ticket_id = await request_over_run(client)
    url = f"/api/approvals/{ticket_id}/deliver"
    assert_error(await client.post(url, headers=as_approver("bob")), 409, "still_pending")
    # A decision recorded by a process that died before resuming the conversation.
    await desk.ledger_at(server.database_url).tickets.decide(ticket_id, approver="bob", approve=True)

    again = await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("carol"))
    assert f"/api/approvals/{ticket_id}/deliver" in assert_error(again, 409, "already_decided")["fix"]
    delivered = await client.post(url, headers=as_approver("carol"))

    assert delivered.status_code == 200, delivered.text
    assert "was paid" in delivered.json()["agent_reply"] and delivered.json()["ticket"]["delivered_at"]
    assert_error(await client.post(url, headers=as_approver("carol")), 409, "already_delivered")
    await assert_resumed_once_and_paid(desk, client, server, "alice", session_id, call, ticket_id)


async def test_inbox_page_is_served_without_external_assets(client):
    page = await client.get("/inbox")
    script, styles = await client.get("/inbox/inbox.js"), await client.get("/inbox/inbox.css")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'id="token"' in page.text and "/api/approvals" in script.text
    for served in (page, script, styles):
        assert served.status_code == 200
        assert "http://" not in served.text and "https://" not in served.text


async def test_a_decision_whose_conversation_cannot_be_reached_answers_json_with_the_fix(desk, client, server):
    ledger = desk.ledger_at(server.database_url)
    # Opened under `adk web --session_service_uri memory://` in another process.
    elsewhere = await open_ticket_for(ledger, 25000, user="dave", session="s-elsewhere", purpose="printer",
                                      session_store="memory:otherhost/0/1:4242:7")
    # Opened here, but its conversation was deleted since.
    gone = await open_ticket_for(ledger, 30000, user="dave", session="s-deleted", purpose="monitor")

    approved = await client.post(f"/api/approvals/{elsewhere.id}/approve", headers=as_approver("bob"))

    # The decision is recorded (202), and the answer says what stands in the way.
    assert approved.status_code == 202, approved.text
    assert approved.json()["ticket"]["status"] == "approved"
    problem = approved.json()["delivery_error"]
    assert problem["error"] == "conversation_unreachable" and "memory of process" in problem["message"]
    retried = await client.post(f"/api/approvals/{elsewhere.id}/deliver", headers=as_approver("carol"))
    assert_error(retried, 502, "conversation_unreachable")

    await client.post(f"/api/approvals/{gone.id}/approve", headers=as_approver("bob"))
    assert_error(await client.post(f"/api/approvals/{gone.id}/deliver", headers=as_approver("bob")),
                 410, "conversation_missing")
    shown = (await client.get(f"/api/approvals/{gone.id}", headers=as_approver("bob"))).json()
    assert shown["ticket"]["delivered_at"] is None
    assert "undelivered" in [entry["action"] for entry in shown["audit"]]
    assert await payouts(desk, server, elsewhere.id) == [] and await payouts(desk, server, gone.id) == []

    # An approver settles what can never be delivered: the approved amount is paid without the agent.
    settled = await client.post(f"/api/approvals/{gone.id}/settle", headers=as_approver("carol"))
    assert settled.status_code == 200, settled.text
    assert settled.json()["ticket"]["settled_by"] == "carol"
    [payout] = await payouts(desk, server, gone.id)
    assert payout.amount_cents == 30000
    assert_error(await client.post(f"/api/approvals/{gone.id}/settle", headers=as_approver("bob")),
                 409, "not_settleable")
    assert_error(await client.post(f"/api/approvals/{gone.id}/deliver", headers=as_approver("bob")),
                 409, "already_settled")
    listed = (await client.get("/api/approvals", headers=as_approver("bob"))).json()
    assert gone.id not in [t["id"] for t in listed["undelivered"]]
    assert elsewhere.id in [t["id"] for t in listed["undelivered"]]


# --- approve with changes, several at once, withdrawn tickets -------------------------


async def test_an_approver_approves_less_over_the_api_and_that_is_paid(client, server):
    session_id, _call, ticket_id = await request_over_run(client)

    answer = await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("bob"),
                               json={"amount": 200, "reason": "over the per diem"})

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["ticket"]["amount"], body["ticket"]["approved_amount"]) == (250.0, 200.0)
    assert [p["amount"] for p in body["payouts"]] == [200.0]
    assert "of the $250.00 you asked: over the per diem" in body["agent_reply"]
    shown = (await client.get(f"/api/approvals/{ticket_id}", headers=as_approver("carol"))).json()
    assert "$200.00 of the $250.00 asked: over the per diem" in [e["detail"] for e in shown["audit"]]
    [(_author, paid)] = function_responses(await events_of(client, "alice", session_id), "reimburse")
    assert (paid["response"]["status"], paid["response"]["amount"]) == ("paid", 200.0)


@pytest.mark.parametrize("action, body, error, says", [
    ("approve", {"amount": 300, "reason": "x"}, "invalid_amount", "more than the $250.00 asked"),
    ("approve", {"amount": 0, "reason": "x"}, "invalid_amount", "more than zero"),
    ("approve", {"amount": -20, "reason": "x"}, "invalid_amount", "more than zero"),
    ("approve", {"amount": "abc", "reason": "x"}, "invalid_amount", "not a number of dollars"),
    ("approve", {"amount": True, "reason": "x"}, "invalid_amount", "must be a number of dollars"),
    ("approve", {"amount": [200], "reason": "x"}, "invalid_amount", "must be a number of dollars"),
    ("approve", {"amount": 200}, "reason_required", "needs a reason"),
    ("reject", {"amount": 200, "reason": "no"}, "invalid_amount", "a rejection pays nothing"),
])
async def test_a_bad_amount_is_422_and_decides_nothing(client, action, body, error, says):
    _session_id, _call, ticket_id = await request_over_run(client)

    answer = await client.post(f"/api/approvals/{ticket_id}/{action}", headers=as_approver("bob"), json=body)

    assert says in assert_error(answer, 422, error)["message"]
    shown = (await client.get(f"/api/approvals/{ticket_id}", headers=as_approver("bob"))).json()
    assert shown["ticket"]["status"] == "pending" and shown["payouts"] == []


async def test_two_expenses_over_run_are_two_tickets_decided_on_their_own(desk, client, server):
    # dave: alice's many lunches on this module's server add up past the two-person line today.
    session_id = await new_session(client, "dave")
    answer = await client.post("/run", json=run_body("dave", session_id, user_text(
        "Reimburse $250 for the team lunch and $480 for the conference ticket")))
    assert answer.status_code == 200, answer.text
    tickets = [r["response"]["ticket_id"] for _a, r in function_responses(answer.json(), "ask_for_approval")]
    assert len(tickets) == 2

    rejected = await client.post(f"/api/approvals/{tickets[1]}/reject", headers=as_approver("bob"),
                                 json={"reason": "not this year"})
    approved = await client.post(f"/api/approvals/{tickets[0]}/approve", headers=as_approver("carol"))

    assert (rejected.status_code, approved.status_code) == (200, 200)
    assert "was rejected by bob (not this year)" in rejected.json()["agent_reply"]
    assert "$250.00 for team lunch was paid" in approved.json()["agent_reply"]
    assert [len(await payouts(desk, server, t)) for t in tickets] == [1, 0]


async def test_deciding_a_withdrawn_ticket_is_409_withdrawn(desk, client, server):
    session_id, _call, ticket_id = await request_over_run(client)
    withdrawn = await client.post("/run", json=run_body("alice", session_id, user_text("cancel my request")))
    assert withdrawn.status_code == 200 and "Withdrawn" in json_texts(withdrawn.json())[-1]

    for action, body in (("approve", None), ("reject", {"reason": "late"})):
        answer = await client.post(f"/api/approvals/{ticket_id}/{action}", headers=as_approver("bob"), json=body)
        assert "withdrawn by its requester, alice" in assert_error(answer, 409, "withdrawn")["message"]
    assert await payouts(desk, server, ticket_id) == []


async def test_adks_own_refusals_and_unreadable_bodies_answer_error_message_fix(desk, client, server):
    _session_id, _call, ticket_id = await request_over_run(client)
    huge = "9" * 5000  # past what Python will turn into an integer
    answers = {
        "not_found": await client.get(f"/apps/{APP}/users/alice/sessions/nope"),
        "invalid_json": await client.post(f"/api/approvals/{ticket_id}/approve", headers={
            **as_approver("bob"), "Content-Type": "application/json"}, content=f'{{"amount": {huge}}}'),
        "invalid_json ": await client.post("/run", headers={"Content-Type": "application/json"},
                                           content=b'{"appName": "\xff\xfe"}'),
    }
    for code, answer in answers.items():
        body = assert_error(answer, 404 if code == "not_found" else 400, code.strip())
        assert body["fix"] and "detail" not in body
    assert (await desk.ledger_at(server.database_url).tickets.get(ticket_id)).status == "pending"


# --- starting it --------------------------------------------------------------------

def test_make_web_on_a_busy_port_says_so_before_any_banner_and_names_a_command_for_another(tmp_path):
    env = os.environ | {"EXPENSES_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/x.db"}
    with socket.socket() as running:  # held as a running server holds it
        running.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        running.bind(("127.0.0.1", 0))
        running.listen()
        port = running.getsockname()[1]
        started = subprocess.run([sys.executable, "-m", "long_running_agent.web", "--port", str(port)], cwd=ROOT,
                                 env=env, capture_output=True, text=True, timeout=120)
    assert started.returncode != 0 and started.stdout == ""
    assert started.stderr.splitlines() == [
        f"error: 127.0.0.1 port {port} is already in use (is another make web running?); serve on another port with:",
        f"  make web ARGS='--port {port + 1}'"]


def test_a_port_a_stopped_server_left_in_time_wait_is_not_reported_busy():
    with socket.socket() as listener:
        # As uvicorn listens: Linux lets a port be bound again in TIME_WAIT only if both sockets ask to.
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _address = listener.accept()
            accepted.close()  # the server's side closes first, so it is the one left in TIME_WAIT
            client.recv(1)
    with socket.socket() as plain, pytest.raises(OSError):  # the port is held: without SO_REUSEADDR, no bind
        plain.bind(("127.0.0.1", port))
    assert not port_in_use("127.0.0.1", port)
