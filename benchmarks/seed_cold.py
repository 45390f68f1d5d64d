"""The seed's pattern from a cold start to its first model call: the yardstick for `python main.py`'s start-up.

Run with:
    .venv/bin/python benchmarks/seed_cold.py PATH.db

What a copy of the basic example does before its model answers: import ADK,
build a `LongRunningFunctionTool` agent, open ADK's `DatabaseSessionService` on
a new SQLite file (the session service `python main.py` keeps its
conversations in), create a session and send the request. Its model prints FIRST_CALL
when it is first called (benchmarks/demo.py times the line) and asks for
approval, as any model would; nothing of this project is imported, so the
yardstick carries none of its cost.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import DatabaseSessionService
from google.adk.tools import LongRunningFunctionTool
from google.genai import types

FIRST_CALL = "first model call"


class AsksForApproval(BaseLlm):
    """A model that asks for approval of the expense in the message, and says when it is first called."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        if any(part.function_response for content in llm_request.contents for part in content.parts or []):
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="It waits for approval.")]))
            return
        print(FIRST_CALL, flush=True)
        call = types.FunctionCall(name="ask_for_approval", args={"purpose": "team offsite lunch", "amount": 250.0})
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))


def ask_for_approval(purpose: str, amount: float) -> dict[str, Any]:
    """Ask a manager to approve a reimbursement above the limit."""
    return {"status": "pending", "purpose": purpose, "amount": amount}


async def main(path: str) -> None:
    agent = LlmAgent(name="expense_agent", model=AsksForApproval(model="asks-for-approval"),
                     instruction="Ask for approval of expenses above $100.",
                     tools=[LongRunningFunctionTool(func=ask_for_approval)])
    sessions = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{path}")
    runner = Runner(app=App(name="seed", root_agent=agent), session_service=sessions)
    session = await runner.session_service.create_session(app_name="seed", user_id="employee")
    message = types.Content(role="user", parts=[types.Part(text="Please reimburse $250.00 for the team lunch.")])
    async for _event in runner.run_async(user_id="employee", session_id=session.id, new_message=message):
        pass


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
