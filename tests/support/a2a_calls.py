"""Another agent calling the expense agent over A2A (JSON-RPC, docs/a2a.md), for tests.

`serving(desk)` runs `make web`'s server (`create_server`) in this process on a real loopback socket, with its
lifespan, so a subscription streams as it would to any client; the helpers send JSON-RPC 1.0 requests as a client
holding one of A2A_CLIENTS's tokens, and read a task's state, ticket and payout as a client's agent would.
"""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import uvicorn
from google.adk.sessions import BaseSessionService
from sqlalchemy import select

from long_running_agent.a2a.records import session_of
from long_running_agent.desk import Desk
from long_running_agent.ledger.storage.schema import A2aTaskRow, TicketRow

from .desks import TestDesk
from .servers import APP, LUNCH, span_processors, take_off

PATH = f"/a2a/{APP}"
CARD = f"{PATH}/.well-known/agent-card.json"
# The clients A2A_CLIENTS names (a token of their own each), and the approvers APPROVERS names. "bob" is both a
# client and an approver: a requester's agent named like an approver, with a token that is not the approver's.
CLIENTS = {"travel-bot": "travel-bot-token-1", "other-bot": "other-bot-token-1", "bob": "bob-client-token-1"}
APPROVER_TOKENS = {"bob": "bob-approver-token", "carol": "carol-approver-token"}
A2A_CLIENTS = ",".join(f"{name}:{token}" for name, token in CLIENTS.items())
APPROVERS = ",".join(f"{name}:{token}" for name, token in APPROVER_TOKENS.items())
TAXI = "Please reimburse $45 for a taxi"


def with_clients(desk: TestDesk, **settings: Any) -> TestDesk:
    """The desk with A2A_CLIENTS and APPROVERS set (and any other `settings`), as `make web` would read them."""
    clients = {token: name for name, token in CLIENTS.items()}
    return desk.configure(a2a_clients=clients, approvers=APPROVERS, **settings)


async def tickets_of(desk: Desk, requester: str | None = None) -> list[str]:
    """The ids of the tickets `requester` (anyone, if None) has in the ledger, of any status."""
    query = select(TicketRow.id) if requester is None else select(TicketRow.id).where(TicketRow.user_id == requester)
    async with await desk.ledger.database.session() as db:
        return list(await db.scalars(query))


async def task_count(desk: Desk) -> int:
    async with await desk.ledger.database.session() as db:
        return len(list(await db.scalars(select(A2aTaskRow.id))))


@asynccontextmanager
async def serving(desk: Desk) -> AsyncIterator[httpx.AsyncClient]:
    """The server on 127.0.0.1 at a port of its own, built with that host and port; a client of it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    before = span_processors()
    from long_running_agent.web import create_server

    app = create_server(desk, host="127.0.0.1", port=port)
    # A subscription left open (a test that failed mid-stream) is closed after a while, not waited for forever.
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, log_level="warning", lifespan="on",
                                           timeout_graceful_shutdown=2))
    running = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if running.done():
                running.result()  # it failed to start: say why
                raise AssertionError("the server stopped before it served")
            await asyncio.sleep(0.01)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            yield client
    finally:
        server.should_exit = True
        await running
        sock.close()
        take_off([p for p in span_processors() if p not in before])


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}


def as_client(name: str) -> dict[str, str]:
    return bearer(CLIENTS[name])


def as_approver(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {APPROVER_TOKENS[name]}"}


def rpc_body(method: str, params: dict[str, Any], request_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


async def call(client: httpx.AsyncClient, who: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A JSON-RPC request as client `who`: its whole answer (a result or an error), always HTTP 200 JSON."""
    response = await client.post(PATH, json=rpc_body(method, params), headers=as_client(who))
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    assert answer["jsonrpc"] == "2.0" and answer["id"] == 1, answer
    return answer


async def result(client: httpx.AsyncClient, who: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    answer = await call(client, who, method, params)
    assert "error" not in answer, answer
    found: dict[str, Any] = answer["result"]
    return found


def error_code(answer: dict[str, Any]) -> int:
    assert "result" not in answer and answer["error"]["message"], answer
    code: int = answer["error"]["code"]
    return code


def message(*parts: dict[str, Any], message_id: str | None = None, **ids: str) -> dict[str, Any]:
    """A user's message of these parts; `ids`: task_id or context_id, as A2A spells them (taskId, contextId)."""
    spelled = {"taskId": ids.get("task_id"), "contextId": ids.get("context_id")}
    return {"messageId": message_id or str(uuid.uuid4()), "role": "ROLE_USER", "parts": list(parts)} | {
        key: value for key, value in spelled.items() if value}


def text(words: str) -> dict[str, Any]:
    return {"text": words}


async def send(client: httpx.AsyncClient, who: str, words: str = LUNCH, **fields: Any) -> dict[str, Any]:
    """SendMessage of `words` as `who`; the task it answers with (fields: message_id, task_id, context_id)."""
    answer = await result(client, who, "SendMessage", {"message": message(text(words), **fields)})
    task: dict[str, Any] = answer["task"]
    return task


async def get_task(client: httpx.AsyncClient, who: str, task_id: str) -> dict[str, Any]:
    return await result(client, who, "GetTask", {"id": task_id})


def state(task: dict[str, Any]) -> str:
    found: str = task["status"]["state"]
    return found.removeprefix("TASK_STATE_").lower()


def data_of(task: dict[str, Any]) -> dict[str, Any]:
    """The data parts of the task's status message, merged: what a client's agent reads instead of words."""
    return {key: value for part in task["status"]["message"]["parts"] if "data" in part
            for key, value in part["data"].items()}


def ticket_of(task: dict[str, Any]) -> dict[str, Any]:
    ticket: dict[str, Any] = data_of(task)["ticket"]
    return ticket


def payouts_of(task: dict[str, Any]) -> list[dict[str, Any]]:
    """The payout of each artifact named "payout", with the artifact's id."""
    return [part["data"]["payout"] | {"artifact_id": artifact["artifactId"]}
            for artifact in task.get("artifacts", []) if artifact["name"] == "payout"
            for part in artifact["parts"] if "data" in part]


async def pending_call_id(sessions: BaseSessionService, who: str, task: dict[str, Any]) -> str:
    """The id of the pending `ask_for_approval` call in the ADK session the task's context runs in."""
    session = await sessions.get_session(app_name=APP, user_id=who, session_id=session_of(who, task["contextId"]))
    assert session is not None
    [call] = [c for e in session.events for c in e.get_function_calls()
              if c.name == "ask_for_approval" and c.id in (e.long_running_tool_ids or set())]
    assert call.id is not None
    return call.id


async def sse_tasks(client: httpx.AsyncClient, who: str, task_id: str) -> AsyncIterator[dict[str, Any]]:
    """SubscribeToTask as `who`: each task the stream carries, as it arrives, until the server ends the stream."""
    async with client.stream("POST", PATH, json=rpc_body("SubscribeToTask", {"id": task_id}),
                             headers=as_client(who)) as stream:
        assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
        async for line in stream.aiter_lines():
            if line.startswith("data:"):
                event = json.loads(line.removeprefix("data:"))
                assert "error" not in event, event
                yield event["result"]["task"]
