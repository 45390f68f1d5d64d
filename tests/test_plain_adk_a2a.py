"""Plain `adk api_server --a2a`, started from the project folder: every message is refused in one line.

ADK mounts the agent at /a2a/long_running_agent because the package ships a card (long_running_agent/agent.json),
and runs each A2A request as the user `A2A_USER_<context id>`: every new context a new requester, with fresh daily
limits. So the agent requests and pays nothing there, and says in one line to call it through make web, which names
the requester from the client's A2A_CLIENTS token (docs/a2a.md).
"""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import httpx
import pytest
from support.http import json_texts, run_body, user_text
from support.project import fresh_project, plain_adk, plain_env, ticket_in
from support.servers import APP, LUNCH

from long_running_agent.ledger.storage.schema import AuditRow, AutoApprovedPayoutRow, PayoutRow, TicketRow

pytestmark = pytest.mark.subprocess

TAXI = "Please reimburse $45 for a taxi"  # paid at once, with no ticket, for a requester the app can name


def send_message(base_url: str, words: str) -> dict:
    """A2A 1.0 SendMessage of `words`, with no credentials (plain adk has none to check); the task it answers."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": words}]}}}
    response = httpx.post(f"{base_url}/a2a/{APP}", json=body, headers={"A2A-Version": "1.0"}, timeout=60)
    assert response.status_code == 200, response.text
    assert "error" not in response.json(), response.json()
    task: dict = response.json()["result"]["task"]
    return task


def send_v03(base_url: str, words: str) -> dict:
    """The same in A2A 0.3's names (message/send), as older clients send it."""
    body = {"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": {"message": {
        "messageId": str(uuid.uuid4()), "role": "user", "kind": "message", "parts": [{"kind": "text", "text": words}]}}}
    response = httpx.post(f"{base_url}/a2a/{APP}", json=body, timeout=60)
    assert response.status_code == 200, response.text
    assert "error" not in response.json(), response.json()
    task: dict = response.json()["result"]
    return task


def agent_texts(task: dict) -> list[str]:
    """Every text the agent gave the task: its artifacts and its own messages."""
    parts = [p for artifact in task.get("artifacts", []) for p in artifact["parts"]]
    parts += [p for m in task.get("history", []) if m["role"] in ("ROLE_AGENT", "agent") for p in m["parts"]]
    parts += (task["status"].get("message") or {}).get("parts", [])
    return [p["text"] for p in parts if p.get("text")]


def assert_refused_in_one_line(task: dict) -> None:
    # The task ends: nothing is left waiting on an approver or on the client.
    assert task["status"]["state"] in ("TASK_STATE_COMPLETED", "TASK_STATE_REJECTED", "completed", "rejected"), task
    [line] = set(agent_texts(task))
    assert "\n" not in line, line
    assert line.startswith("Plain `adk api_server --a2a` cannot tell who is asking"), line
    assert "nothing is requested or paid here" in line, line
    assert "make web" in line and "/a2a/long_running_agent" in line and "A2A_CLIENTS" in line, line


def rows(database: Path, table: str, columns: str = "*") -> list[tuple]:
    with sqlite3.connect(database) as db:
        return db.execute(f"SELECT {columns} FROM {table}").fetchall()


def test_plain_api_server_with_a2a_refuses_every_message_in_one_line_and_opens_no_ticket(tmp_path):
    project, home = fresh_project(tmp_path), tmp_path / "home"
    database = tmp_path / "expenses.db"
    env = plain_env(home, EXPENSES_DATABASE_URL=f"sqlite+aiosqlite:///{database}")
    with plain_adk("api_server", project, home, "--a2a", env=env) as server:
        card = httpx.get(f"{server.base_url}/a2a/{APP}/.well-known/agent-card.json", timeout=30)
        assert card.status_code == 200 and card.json()["name"] == APP, card.text

        assert_refused_in_one_line(send_message(server.base_url, LUNCH))
        assert_refused_in_one_line(send_v03(server.base_url, TAXI))

        # The same server's own API, as alice: the ledger it writes is the one read below, and a ticket shows there.
        session = httpx.post(f"{server.base_url}/apps/{APP}/users/alice/sessions", json={}, timeout=30).json()["id"]
        answer = httpx.post(f"{server.base_url}/run", json=run_body("alice", session, user_text(LUNCH)), timeout=60)
        ticket = ticket_in(" ".join(json_texts(answer.json())))
        log = server.log.read_text()

    # Alice's ticket, and none from the A2A messages: they requested nothing, and nothing was paid.
    assert rows(database, TicketRow.__tablename__, "id, user_id") == [(ticket, "alice")]
    assert rows(database, PayoutRow.__tablename__) == []
    assert rows(database, AutoApprovedPayoutRow.__tablename__) == []
    assert "A2A_USER_" not in str(rows(database, AuditRow.__tablename__))
    assert "Traceback" not in log and " - ERROR - " not in log, log[-3000:]

