"""How ADK's evaluator sends this app's resume turns: the pending call's id on the answer, each turn scored apart.

ADK 2.13's evaluator sends a user turn as written, but the pending call's id is made at run time: as
the dev UI does, a response with no id gets the id of the one call of that name still waiting. ADK
resumes the original invocation and the evaluator files events by invocation id, so it would score a
request and its resume as one; the evaluator's record of a resumed turn gets an id of its own (the
session keeps ADK's). Both happen in the evaluator's per-turn step (adk_compat.py). See docs/testing.md.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

from google.adk.events import Event
from google.adk.runners import Runner
from google.adk.sessions import Session
from google.genai import types

# By name, not `..`: `adk eval` loads this folder as a top-level package (see __init__.py).
from long_running_agent.adk_compat import adk_evaluator_turn, replace_evaluator_turn
from long_running_agent.delivery.guard import ApprovalGuard
from long_running_agent.ledger.storage.engine import DEFAULT_DATABASE_URL
from long_running_agent.settings import Settings


class EvalSetupError(RuntimeError):
    """The eval was started without what its resume turns need."""


def pending_call_id(session: Session, name: str | None) -> str:
    """The id of the one long-running call named `name` that no user response has answered yet."""
    calls = [call.id for event in session.events for call in event.get_function_calls()
             if call.name == name and call.id in (event.long_running_tool_ids or set())]
    answered = {response.id for event in session.events if event.author == "user"
                for response in event.get_function_responses()}
    pending = [call_id for call_id in calls if call_id not in answered]
    if len(pending) != 1:
        raise EvalSetupError(
            f"The eval case answers {name!r}, but the conversation has {len(pending)} pending calls of "
            "that name; the turn before must leave exactly one waiting (or give the response its id)."
        )
    return pending[0]


def settings_of(runner: Runner) -> Settings:
    """The settings the evaluated app runs on: its approval guard's desk's."""
    guard = runner.plugin_manager.get_plugin("approval_guard")
    if not isinstance(guard, ApprovalGuard):
        raise EvalSetupError("The evaluated app has no approval guard: evaluate the app agent.py builds.")
    return guard.desk.settings


def answering_pending_calls(settings: Settings, session: Session, message: types.Content) -> types.Content:
    """`message` with the pending call's id on each function response that has none."""
    parts = message.parts or []
    if not any(part.function_response and not part.function_response.id for part in parts):
        return message
    check_chat_approval(settings)
    return types.Content(role=message.role, parts=[
        types.Part(function_response=part.function_response.model_copy(
            update={"id": pending_call_id(session, part.function_response.name)}
        )) if part.function_response and not part.function_response.id else part
        for part in parts
    ])


def check_ledger(settings: Settings) -> None:
    """Every turn: the eval pays and approves its own tickets, so it must not write to the app's ledger."""
    if settings.database_url == DEFAULT_DATABASE_URL:
        raise EvalSetupError(
            "The eval pays expenses and approves its own tickets, and expects a fresh ledger; point "
            'EXPENSES_DATABASE_URL at a throwaway one, e.g. "sqlite+aiosqlite:///$(mktemp -d)/eval.db".'
        )


def check_chat_approval(settings: Settings) -> None:
    """A resume turn: only DEV_CHAT_APPROVAL lets an answer in the chat decide a ticket."""
    if not settings.dev_chat_approval:
        raise EvalSetupError(
            "The eval's resume turns answer the approval in the chat, which only DEV_CHAT_APPROVAL=true "
            "allows; run the eval with it, on a throwaway ledger (see docs/testing.md)."
        )


async def _one_turn(
    runner: Runner, user_id: str, session_id: str, user_content: types.Content
) -> AsyncGenerator[Event, None]:
    """ADK's step for one user turn, with the pending call's id filled in and a resume filed as its own turn."""
    settings = settings_of(runner)
    check_ledger(settings)
    session = await runner.session_service.get_session(app_name=runner.app_name, user_id=user_id, session_id=session_id)
    earlier = {event.invocation_id for event in session.events} if session else set()
    message = answering_pending_calls(settings, session, user_content) if session else user_content
    turn_id: str | None = None
    async with aclosing(adk_evaluator_turn(runner, user_id, session_id, message)) as events:
        async for event in events:
            if turn_id is None:
                turn_id = Event.new_id() if event.invocation_id in earlier else event.invocation_id
            # A copy: the evaluator's record changes, the session keeps ADK's ids.
            yield event if event.invocation_id == turn_id else event.model_copy(update={"invocation_id": turn_id})


def use_in_adk_evaluator() -> None:
    """Make ADK's evaluator send this app's resume turns as above (once per process)."""
    replace_evaluator_turn(_one_turn)
