"""A conversation with the agent through a real Runner, for tests."""

from __future__ import annotations

from typing import Any

from google.adk.events import Event
from google.adk.runners import Runner
from google.genai import types

from support.desks import TestDesk
from support.models import make_runner, runner_with


def function_response(call_id: str | None, name: str | None, response: dict[str, Any]) -> types.Content:
    return types.Content(
        role="user",
        parts=[types.Part(function_response=types.FunctionResponse(id=call_id, name=name, response=response))],
    )


def pending_calls(events: list[Event]) -> list[types.FunctionCall]:
    return [c for e in events for c in e.get_function_calls() if c.id in (e.long_running_tool_ids or set())]


def calls(events: list[Event], name: str) -> list[types.FunctionCall]:
    return [c for e in events for c in e.get_function_calls() if c.name == name]


def responses(events: list[Event], name: str) -> list[dict[str, Any]]:
    return [dict(r.response or {}) for e in events for r in e.get_function_responses() if r.name == name]


def event_texts(events: list[Event]) -> list[str]:
    """The text of ADK events as a Runner yields them; support/http.py's `json_texts` reads them as JSON."""
    return [p.text for e in events if e.content and e.content.parts for p in e.content.parts if p.text]


class Conversation:
    def __init__(self, runner: Runner, user_id: str = "alice") -> None:
        self.runner = runner
        self.user_id = user_id
        self.session_id: str | None = None

    async def start(self) -> Conversation:
        session = await self.runner.session_service.create_session(
            app_name=self.runner.app_name, user_id=self.user_id
        )
        self.session_id = session.id
        return self

    async def send(self, message: types.Content) -> list[Event]:
        return [
            event
            async for event in self.runner.run_async(
                user_id=self.user_id, session_id=self.session_id, new_message=message
            )
        ]

    async def say(self, text: str) -> list[Event]:
        return await self.send(types.Content(role="user", parts=[types.Part(text=text)]))

    async def answer(self, call: types.FunctionCall, response: dict[str, Any]) -> list[Event]:
        """The seed's crucial step: an updated FunctionResponse, same id and name, role user."""
        return await self.send(function_response(call.id, call.name, response))


async def request_large(
    desk: TestDesk, db_url: str, model: Any = None
) -> tuple[Runner, Conversation, list[Event], types.FunctionCall, dict[str, Any]]:
    """Ask for $250 (above the threshold) in a new conversation on `desk`: the call waits for an approver."""
    runner = runner_with(desk, model, db_url) if model else make_runner(desk, db_url)
    chat = await Conversation(runner).start()
    events = await chat.say("Please reimburse $250 for the team lunch")
    [call] = pending_calls(events)
    [pending] = responses(events, "ask_for_approval")
    return runner, chat, events, call, pending


async def pending_request(
    desk: TestDesk, url: str, model: Any = None
) -> tuple[Conversation, types.FunctionCall, str]:
    _runner, chat, _events, pending_call, ticket = await request_large(desk, url, model)
    return chat, pending_call, ticket["ticket_id"]
