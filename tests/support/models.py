"""Test models (a scripted one that fails loudly, the offline one recorded) and runners of the shipped app."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import DatabaseSessionService
from google.genai import types
from pydantic import Field

from long_running_agent.agent import build_app
from long_running_agent.ledger import Ledger
from long_running_agent.ledger.storage.engine import create_engine
from long_running_agent.ledger.storage.schema import Base, PendingCountRow
from long_running_agent.model.offline import OFFLINE_MODEL_NAME, OfflineExpenseModel

from .desks import TestDesk

OFFLINE = OFFLINE_MODEL_NAME


class ScriptedModel(BaseLlm):
    """Replays `script` one part per call; a call past the end is a test failure."""

    model: str = "scripted"
    script: list[types.Part] = Field(default_factory=list)
    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        if len(self.requests) > len(self.script):
            raise AssertionError(f"unexpected model call #{len(self.requests)}: {llm_request.contents[-1]}")
        yield LlmResponse(content=types.Content(role="model", parts=[self.script[len(self.requests) - 1]]))


class RecordedOfflineModel(OfflineExpenseModel):
    """The offline model, keeping every request so tests can count model calls."""

    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        async for response in super().generate_content_async(llm_request, stream):
            yield response


def call_part(name: str, **args) -> types.Part:
    """A ScriptedModel turn that calls `name`; support/fake_gemini.py's `gemini_call` is the wire's."""
    return types.Part(function_call=types.FunctionCall(name=name, args=args))


def text_part(value: str) -> types.Part:
    """A ScriptedModel turn that answers with text."""
    return types.Part(text=value)


def session_service(desk: TestDesk, database_url: str) -> DatabaseSessionService:
    """ADK's session store on an engine of its own, as another process would have (disposed after the test)."""
    desk.start_from_template(database_url)  # when it is the test's own file, still to be made
    sessions = DatabaseSessionService(db_engine=create_engine(database_url))
    desk.opened.append(sessions.db_engine)
    return sessions


def runner_with(desk: TestDesk, model: BaseLlm | str, database_url: str | None = None) -> Runner:
    """The app exactly as shipped (agent, tools, guard) on `desk`, with `model` swapped in.

    Its sessions have an engine of their own, as another process would.
    """
    sessions = session_service(desk, database_url or desk.settings.database_url)
    return Runner(app=build_app(desk, model=model), session_service=sessions)


def make_runner(desk: TestDesk, database_url: str | None = None) -> Runner:
    """The app as shipped, with the offline model, on its own engine."""
    return runner_with(desk, OFFLINE, database_url)


async def empty(ledger: Ledger) -> None:
    """Every table emptied (children first), for a search's next example on the same database."""
    async with await ledger.database.session() as db, db.begin():
        for table in reversed(Base.metadata.sorted_tables):
            await db.execute(table.delete())
        # Emptying the tickets moved the pending count (a trigger); it starts again from nothing.
        await db.execute(PendingCountRow.__table__.delete())
