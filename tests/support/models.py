"""Test models: a scripted one that fails loudly, and the offline one, recorded."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.runners import Runner
from google.genai import types
from pydantic import Field

from long_running_agent.agent import build_app
from long_running_agent.offline_model import OfflineExpenseModel
from long_running_agent.runtime import session_service


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


def call(name: str, **args) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=args))


def text(value: str) -> types.Part:
    return types.Part(text=value)


def runner_with(model: BaseLlm, database_url: str) -> Runner:
    """The app exactly as shipped (agent, tools, guard), with `model` swapped in."""
    return Runner(app=build_app(model=model), session_service=session_service(database_url))
