"""Another agent asks the expense agent over A2A for a reimbursement, then waits for the approvers' outcome.

Run with (from the project folder, `make web` running with A2A_CLIENTS=travel-bot:change-me-travel-bot):
    EXPENSES_A2A_TOKEN=change-me-travel-bot .venv/bin/python examples/a2a_requester/main.py
Meanwhile an approver decides the ticket it prints (.venv/bin/expenses approve T-... --approver bob); the script
ends with the outcome, exit status 0 when the task ends completed. The agent is in agent.py.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import httpx
from a2a.client import A2AClientError, ClientConfig, create_client
from a2a.types import SubscribeToTaskRequest
from agent import AGENT_URL, TOKEN, root_agent, with_token
from google.adk.agents.remote_a2a_agent import A2A_METADATA_PREFIX, DEFAULT_TIMEOUT
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types
from google.protobuf.json_format import MessageToDict

USER = "alice"  # this side's user; the expense agent knows the requester by the token, as A2A_CLIENTS names it
ENDED = ("TASK_STATE_COMPLETED", "TASK_STATE_REJECTED", "TASK_STATE_CANCELED", "TASK_STATE_FAILED")
RESUBSCRIBE_SECONDS = 5.0


def data(task: dict[str, Any]) -> dict[str, Any]:
    """The data parts of the task's status message, merged: the ticket, or why it was canceled."""
    return {key: value for part in task["status"].get("message", {}).get("parts", []) if "data" in part
            for key, value in part["data"].items()}


def words(task: dict[str, Any]) -> str:
    return " ".join(part["text"] for part in task["status"].get("message", {}).get("parts", []) if "text" in part)


async def delegate(text: str) -> dict[str, Any]:
    """One turn of the requester's agent on `text`: the A2A task the expense agent answered with."""
    runner = Runner(app_name="a2a_requester", agent=root_agent, session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id=USER)
    message = types.Content(role="user", parts=[types.Part(text=text)])
    answered: dict[str, Any] | None = None
    async for event in runner.run_async(user_id=USER, session_id=session.id, new_message=message):
        # RemoteA2aAgent keeps the task it was sent in the event: its id under "a2a:task_id", the task under
        # "a2a:response". A task still `working` also ends the turn with an error event ("stream ended before task
        # ... reached a terminal state"): ADK expects the remote task to end or ask for input, and this one waits
        # for approvers instead, which the task's owner must never be (docs/a2a.md).
        metadata = event.custom_metadata or {}
        if f"{A2A_METADATA_PREFIX}task_id" in metadata:
            answered = metadata[f"{A2A_METADATA_PREFIX}response"]
        elif event.error_message and answered is None:
            raise SystemExit(f"error: {event.error_message}\nCheck that make web runs at {AGENT_URL} and that "
                             "EXPENSES_A2A_TOKEN is one of its A2A_CLIENTS tokens (examples/a2a_requester/README.md).")
    if answered is None:
        raise SystemExit("error: the expense agent answered with no task.")
    return answered


async def outcome(task_id: str) -> dict[str, Any]:
    """The task once it ends. SubscribeToTask sends it each time it changes; approvers may take days."""
    # No read timeout: the stream is quiet until the task changes.
    async with with_token(httpx.Timeout(DEFAULT_TIMEOUT, read=None)) as http:
        client = await create_client(AGENT_URL, ClientConfig(httpx_client=http))
        while True:
            try:
                async for streamed in client.subscribe(SubscribeToTaskRequest(id=task_id)):
                    task: dict[str, Any] = MessageToDict(streamed.task)
                    if task["status"]["state"] in ENDED:
                        return task
            except A2AClientError as error:
                if not isinstance(error.__cause__, httpx.TransportError):
                    raise  # refused, not cut off: subscribing again would not help
            # Cut off (the server restarted, a proxy closed the stream): the task is in the server's database.
            await asyncio.sleep(RESUBSCRIBE_SECONDS)


def show(task: dict[str, Any]) -> None:
    state = task["status"]["state"].removeprefix("TASK_STATE_").lower()
    print(f"task     | {state}: {words(task)}")
    for artifact in task.get("artifacts", []):
        for payout in [part["data"]["payout"] for part in artifact["parts"] if "payout" in part.get("data", {})]:
            approvers = " and ".join(payout.get("approved_by") or [])
            how = f"approved by {approvers}" if approvers else "paid at once (within the limit)"
            print(f"payout   | {payout['payout_id']}: ${payout['amount']:,.2f}, {how}")
    if because := data(task).get("canceled_because"):
        print(f"canceled | {because}")


async def main(text: str) -> int:
    print(f"Expense agent: {AGENT_URL} (A2A)\n")
    print("== 1. The requester's agent hands the request over (RemoteA2aAgent) ==")
    print(f"user     | {text}")
    task = await delegate(text)
    if task["status"]["state"] in ENDED:  # answered at once: paid within the limit, or refused
        show(task)
        return 0 if task["status"]["state"] == "TASK_STATE_COMPLETED" else 1

    ticket = data(task)["ticket"]
    print(f"task     | {task['id']} working")
    print(f"ticket   | {ticket['ticket_id']}: ${ticket['amount']:,.2f} for {ticket['purpose']}, {ticket['status']}, "
          f"{ticket.get('missing', '')}; expires {ticket['expires_at']}")

    print("\n== 2. Approvers decide on their own channels; the task stays working until they do ==")
    print(f"approver | .venv/bin/expenses approve {ticket['ticket_id']} --approver bob   (or the inbox, or Slack)")
    print(f"waiting  | SubscribeToTask {task['id']}")

    ended = await outcome(task["id"])
    print("\n== 3. The outcome ==")
    show(ended)
    return 0 if ended["status"]["state"] == "TASK_STATE_COMPLETED" else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--text", default="Please reimburse $250 for the team lunch", help="what the user asks")
    arguments = parser.parse_args()
    if not TOKEN:
        sys.exit("error: EXPENSES_A2A_TOKEN is not set. Set it to this requester's token in the server's "
                 "A2A_CLIENTS (name:token): EXPENSES_A2A_TOKEN=change-me-travel-bot "
                 ".venv/bin/python examples/a2a_requester/main.py")
    sys.exit(asyncio.run(main(arguments.text)))
