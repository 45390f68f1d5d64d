"""The flow as a transcript, one labelled line per step, and the pending long-running calls in a run's events."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .ledger.inputs import printable

if TYPE_CHECKING:  # the approver commands that only read the ledger never load ADK (cli/commands.py)
    from google.adk.events import Event
    from google.adk.runners import Runner
    from google.genai import types


class Transcript:
    """What the agent and its tools do, one labelled line each (raw events with --verbose)."""

    def __init__(self, verbose: bool = False) -> None:
        self.verbose = verbose

    def say(self, label: str, text: str) -> None:
        print(f"{label:<9}| {printable(text)}")

    def show(self, event: Event) -> None:
        if self.verbose:
            print(event.model_dump_json(exclude_none=True, indent=1))
        for part in event.content.parts if event.content and event.content.parts else []:
            if part.function_call:
                call = part.function_call
                marked = "  [long-running]" if call.id in (event.long_running_tool_ids or set()) else ""
                self.say("agent", f"calls {call.name}({_fields(call.args)}){marked}")
            elif part.function_response:
                self.say("tool", f"{part.function_response.name} -> {_fields(part.function_response.response)}")
            elif part.text and not part.thought:
                self.say("user" if event.author == "user" else "agent", part.text)

    async def send(self, runner: Runner, user_id: str, session_id: str, message: types.Content) -> list[Event]:
        """Run the agent on `message`, printing what happens; returns the events."""
        events = []
        async for event in runner.run_async(user_id=user_id, session_id=session_id, new_message=message):
            self.show(event)
            events.append(event)
        return events


def _fields(values: dict[str, Any] | None) -> str:
    keep = ("status", "ticket_id", "payout_id", "purpose", "amount", "decided_by", "reason", "error")
    shown = {k: v for k, v in (values or {}).items() if k in keep and v is not None}
    return ", ".join(f"{k}={v!r}" for k, v in shown.items())


def user_text(text: str) -> types.Content:
    from google.genai import types

    return types.Content(role="user", parts=[types.Part(text=text)])


def pending_calls(events: list[Event]) -> list[types.FunctionCall]:
    """The long-running calls the agent is waiting on (one per expense), found via long_running_tool_ids."""
    return [call for event in events for call in event.get_function_calls()
            if call.id in (event.long_running_tool_ids or set())]


def pending_call(events: list[Event]) -> types.FunctionCall | None:
    """The first long-running call the agent is waiting on."""
    return next(iter(pending_calls(events)), None)


def tool_response(events: list[Event], call_id: str | None) -> dict[str, Any]:
    for event in events:
        for response in event.get_function_responses():
            if response.id == call_id:
                return dict(response.response or {})
    return {}
