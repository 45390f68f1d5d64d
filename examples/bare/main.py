"""The long-running-tool pattern in five steps, top to bottom: a request waits for a person, then pays.

Run with (from the project folder; `make .venv/.app` makes the .venv):
    .venv/bin/python examples/bare/main.py
The agent and its two tools are in expense_agent/agent.py.
"""

from __future__ import annotations

import asyncio

from expense_agent.agent import MODEL, root_agent
from google.adk.events import Event
from google.adk.runners import InMemoryRunner, Runner
from google.genai import types

USER = "alice"


def show(event: Event) -> None:
    """What the agent said or did in `event`, one line per part."""
    for part in event.content.parts or [] if event.content else []:
        if call := part.function_call:
            args = ", ".join(f"{name}={value!r}" for name, value in (call.args or {}).items())
            waits = "  [long-running]" if call.id in (event.long_running_tool_ids or set()) else ""
            print(f"agent    | calls {call.name}({args}){waits}")
        elif answer := part.function_response:
            print(f"tool     | {answer.name} -> {answer.response}")
        elif part.text:
            print(f"agent    | {part.text}")


async def run(runner: Runner) -> str:
    """Steps 1 to 5 in a new conversation on `runner`; returns its session id."""
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id=USER)
    print("== 1. The employee asks ==")
    request = "Please reimburse $250 for the team lunch."
    print(f"user     | {request}")
    message = types.Content(role="user", parts=[types.Part(text=request)])
    events = [e async for e in runner.run_async(user_id=USER, session_id=session.id, new_message=message)]

    print("\n== 2. The agent calls ask_for_approval, which answers at once: pending ==")
    for event in events:
        show(event)

    print("\n== 3. The app finds the pending call: its id is in long_running_tool_ids ==")
    call = next(c for e in events for c in e.get_function_calls() if c.id in (e.long_running_tool_ids or set()))
    print(f"pending  | id={call.id} name={call.name}")

    print("\n== 4. Later (minutes or days), a person decides ==\napprover | approved")

    print("\n== 5. The app sends the updated FunctionResponse: same id and name, role user ==")
    # Nothing checks this answer: whoever sends it gets the money. The product's guard refuses one
    # that its ledger did not record (long_running_agent/delivery/guard.py).
    approval = types.FunctionResponse(id=call.id, name=call.name, response={"status": "approved"})
    print(f"user     | FunctionResponse(id={approval.id}, name={approval.name}, response={approval.response})")
    message = types.Content(role="user", parts=[types.Part(function_response=approval)])
    async for event in runner.run_async(user_id=USER, session_id=session.id, new_message=message):
        show(event)
    return session.id


if __name__ == "__main__":
    print(f"Model: {MODEL}\n")
    asyncio.run(run(InMemoryRunner(agent=root_agent, app_name="expense_agent")))
