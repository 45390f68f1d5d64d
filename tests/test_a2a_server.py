"""Other agents over A2A against a real `make web` on 127.0.0.1: a request, its decision on another channel, and
the outcome (docs/a2a.md).

Another agent's side is a2a-sdk's own client (with a client token from A2A_CLIENTS) or examples/a2a_requester/,
run as a process; approvers decide with `.venv/bin/expenses` in a process of its own, on the server's database.
The rules: a $250 request answers with a `working` task whose data part names the pending ticket; an approval
made anywhere completes that task with one payout, and a client's push configuration gets the completed task,
with its token in X-A2A-Notification-Token; a restart between the request and the decision loses nothing;
SubscribeToTask streams the task over SSE while it works, then completed, then ends.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import Client
from a2a.types import SubscribeToTaskRequest, TaskPushNotificationConfig
from google.protobuf.json_format import MessageToDict
from support.a2a_calls import payouts_of, state, ticket_of
from support.a2a_requester import ask, example, get, sdk_client
from support.processes import run
from support.receiver import Receiver
from support.servers import WebServer, web_server

from long_running_agent.ledger import Ledger, TicketStatus

pytestmark = pytest.mark.subprocess

# A client per test: each test's requests are its own requester's, whatever ran before it on the shared server.
CLIENTS = {name: f"{name}-token-1" for name in ("lunch-bot", "push-bot", "stream-bot", "example-bot", "restart-bot")}
SETTINGS = {"A2A_CLIENTS": ",".join(f"{name}:{token}" for name, token in CLIENTS.items()),
            "APPROVERS": "bob:bob-approver-token,carol:carol-approver-token"}
PUSH_TOKEN = "a-token-of-the-receiver"
TICKET_ID = re.compile(r"T-[0-9a-f]{12}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    """One `make web` for the module, with its clients and approvers; the restart test starts its own."""
    with web_server(tmp_path_factory.mktemp("a2a-server"), **SETTINGS) as running:
        yield running


def approve(server: WebServer, ticket_id: str, approver: str = "bob") -> None:
    """`.venv/bin/expenses approve <ticket> --approver <approver>`, in its own process, on the server's database."""
    done = run("approve", ticket_id, "--approver", approver, url=server.database_url, env=SETTINGS)
    assert done.returncode == 0, done.stdout + done.stderr


def pending(task: dict[str, Any], requester: str) -> str:
    """The id of the pending $250 ticket the working task's data part names, for `requester`."""
    ticket = ticket_of(task)
    assert state(task) == "working", task
    assert TICKET_ID.fullmatch(ticket["ticket_id"]), ticket
    assert (ticket["status"], ticket["amount"], ticket["requested_by"]) == ("pending", 250, requester)
    found: str = ticket["ticket_id"]
    return found


def push_to(receiver: Receiver, task_id: str = "") -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(task_id=task_id, url=receiver.url, token=PUSH_TOKEN)


def the_push(receiver: Receiver) -> dict[str, Any]:
    """The one POST the receiver got (waiting for it): its task, once the token header was checked."""
    receiver.wait_for(1)
    assert len(receiver.received) == 1, f"{len(receiver.received)} pushes, not one: {receiver.events()}"
    [received] = receiver.received
    headers = {name.lower(): value for name, value in received.headers.items()}
    assert headers.get("x-a2a-notification-token") == PUSH_TOKEN, headers
    task: dict[str, Any] = received.json["task"]
    return task


async def paid_once(ledger: Ledger, ticket_id: str, task: dict[str, Any]) -> None:
    """The ticket is approved and paid once in the ledger, and `task` is completed with that payout."""
    assert (await ledger.tickets.get(ticket_id)).status is TicketStatus.APPROVED
    [payout] = await ledger.payouts.find(ticket_id=ticket_id)
    assert state(task) == "completed", task
    assert [(p["payout_id"], p["artifact_id"], p["amount"], p["ticket_id"]) for p in payouts_of(task)] == [
        (payout.id, payout.id, 250, ticket_id)]


# --- a request, and its ticket ------------------------------------------------------------------------------------


async def test_a_request_over_the_limit_answers_a_working_task_whose_data_names_the_pending_ticket(server, desk):
    async with sdk_client(server.base_url, CLIENTS["lunch-bot"]) as client:
        task = await ask(client)
        again = await get(client, task["id"])

    ticket_id = pending(task, "lunch-bot")
    ticket = await desk.ledger_at(server.database_url).tickets.get(ticket_id)
    assert (ticket.status, ticket.user_id, ticket.amount_cents) == (TicketStatus.PENDING, "lunch-bot", 25_000)
    assert (state(again), ticket_of(again)["ticket_id"]) == ("working", ticket_id)


# --- the decision, from the approver CLI --------------------------------------------------------------------------


async def test_the_cli_approval_completes_the_task_with_one_payout_and_the_push_carries_it_with_its_token(
        server, desk):
    async with sdk_client(server.base_url, CLIENTS["push-bot"]) as client:
        task = await ask(client)
        ticket_id = pending(task, "push-bot")
        with Receiver() as receiver:
            await client.create_task_push_notification_config(push_to(receiver, task["id"]))

            approve(server, ticket_id)

            pushed = the_push(receiver)
            done = await get(client, task["id"])

    ledger = desk.ledger_at(server.database_url)
    await paid_once(ledger, ticket_id, done)
    await paid_once(ledger, ticket_id, pushed)
    assert pushed["id"] == task["id"]


async def test_a_restart_between_the_request_and_the_decision_loses_nothing(tmp_path, desk):
    with Receiver() as receiver:
        with web_server(tmp_path, name="before", **SETTINGS) as before:
            async with sdk_client(before.base_url, CLIENTS["restart-bot"]) as client:
                task = await ask(client, push=push_to(receiver))  # the push configuration comes with the message
        ticket_id = pending(task, "restart-bot")

        approve(before, ticket_id)  # while no server runs

        with web_server(tmp_path, database_url=before.database_url, name="after", **SETTINGS) as after:
            async with sdk_client(after.base_url, CLIENTS["restart-bot"]) as client:
                done = await get(client, task["id"])
            pushed = the_push(receiver)

    ledger = desk.ledger_at(before.database_url)
    await paid_once(ledger, ticket_id, done)
    await paid_once(ledger, ticket_id, pushed)
    assert (done["id"], pushed["id"]) == (task["id"], task["id"])


# --- a subscription, over real SSE --------------------------------------------------------------------------------


async def test_subscribe_to_task_streams_the_working_task_then_the_completed_one_then_ends(server, desk):
    async with sdk_client(server.base_url, CLIENTS["stream-bot"]) as client:
        task = await ask(client)
        ticket_id = pending(task, "stream-bot")
        streamed: list[dict[str, Any]] = []
        following = asyncio.create_task(follow(client, task["id"], streamed))
        try:
            async with asyncio.timeout(15):
                while not streamed:
                    await asyncio.sleep(0.05)
        except TimeoutError:
            following.cancel()
            pytest.fail("SubscribeToTask sent nothing while the task was working: it sends the task now, then on "
                        "each change (docs/a2a.md)")
        assert state(streamed[0]) == "working" and ticket_of(streamed[0])["ticket_id"] == ticket_id

        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:  # the approvals API, as bob
            approved = await http.post(f"/api/approvals/{ticket_id}/approve",
                                       headers={"Authorization": "Bearer bob-approver-token"})
        assert approved.status_code == 200, approved.text
        async with asyncio.timeout(30):
            await following  # the server ends the stream once the task ends

    states = [state(each) for each in streamed]
    assert states[-1] == "completed" and set(states[:-1]) == {"working"}, states
    await paid_once(desk.ledger_at(server.database_url), ticket_id, streamed[-1])


async def follow(client: Client, task_id: str, streamed: list[dict[str, Any]]) -> None:
    async for response in client.subscribe(SubscribeToTaskRequest(id=task_id)):
        streamed.append(MessageToDict(response.task))


# --- the example, examples/a2a_requester/ -------------------------------------------------------------------------


async def test_the_example_shows_the_pending_ticket_then_the_outcome_once_the_cli_approves(server, desk):
    ledger = desk.ledger_at(server.database_url)
    with example(server.base_url, CLIENTS["example-bot"]) as printed:
        # The command it prints for an approver, run as printed.
        command = printed.wait_for(r"^approver \| \.venv/bin/expenses (approve (T-[0-9a-f]{12}) --approver bob)\b")
        ticket_id = command.group(2)
        assert printed.wait_for(rf"^ticket   \| {ticket_id}: \$250\.00 for team lunch, pending\b")
        ticket = await ledger.tickets.get(ticket_id)
        assert (ticket.status, ticket.user_id) == (TicketStatus.PENDING, "example-bot")

        done = run(*command.group(1).split(), url=server.database_url, env=SETTINGS)
        assert done.returncode == 0, done.stdout + done.stderr
        status = printed.ended()

    [payout] = await ledger.payouts.find(ticket_id=ticket_id)
    assert status == 0, "\n".join(printed.lines)
    outcome = printed.lines[printed.lines.index("== 3. The outcome =="):]
    assert any(line.startswith(f"task     | completed: Ticket {ticket_id} was approved by bob") for line in outcome), \
        outcome
    assert f"payout   | {payout.id}: $250.00, approved by bob" in outcome, outcome
