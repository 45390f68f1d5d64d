"""The one place this app relies on ADK's private names and on the words of ADK's errors.

Each is read here with the ADK behaviour it relies on, checked on google-adk 2.8 to 2.13, and what the app
does on a release without it. tests/test_adk_compat.py checks every assumption, naming the one a release
breaks (`make test-adk` runs it on each), and that no other module touches an underscore name of ADK.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator, Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.invocation_context import InvocationContext
from google.adk.cli.utils.local_storage import PerAgentDatabaseSessionService
from google.adk.events import Event
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, InMemorySessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from sqlalchemy import Select, bindparam, select

logger = logging.getLogger(__name__)

# --- A model's declared capabilities ---------------------------------------------
# ADK 2.7+ asks each model for `BaseLlm.capabilities` and judges one that does not say by its name (a
# deprecated fallback), so the offline model declares plain `LlmCapabilities()` (exported by
# `google.adk.models` from the private `_capabilities`). Before 2.7 a stand-in keeps the override valid.
try:
    from google.adk.models import LlmCapabilities as LlmCapabilities
except ImportError:  # google-adk < 2.7

    class LlmCapabilities:  # type: ignore[no-redef]
        """Stands in for ADK's class on releases that read no capabilities."""


# --- Where a session store keeps its sessions --------------------------------------
# Plain `adk web`, `adk api_server` and `adk run` keep each app's sessions in a SqliteSessionService at
# `<agent folder>/.adk/session.db`, picked by PerAgentDatabaseSessionService's `_get_service(app_name)`; the
# file it opens is its `_db_path`; neither is public. Without `_get_service` the file is found where ADK puts
# it; without `_db_path` a decision made in another process reaches the conversation on its next message.
PER_AGENT_ROUTING = "_get_service"
SQLITE_FILE = "_db_path"
# Made absolute as the SqliteSessionService file is named below (os.path.abspath: symlinks kept).
PER_AGENT_SESSION_FILE = Path(os.path.abspath(Path(__file__).parent / ".adk" / "session.db"))


async def per_agent_store(service: PerAgentDatabaseSessionService, app_name: str) -> BaseSessionService | Path:
    """The store ADK's per-agent service keeps `app_name`'s sessions in, or the file it would be."""
    route = getattr(service, PER_AGENT_ROUTING, None)
    if route is None:
        return PER_AGENT_SESSION_FILE
    store: BaseSessionService = await route(app_name)
    return store


def sqlite_file(service: SqliteSessionService) -> str | None:
    """The file a SqliteSessionService opens, or None if this release does not say."""
    path = getattr(service, SQLITE_FILE, None)
    return path if isinstance(path, str) and path not in ("", ":memory:") else None


# --- A run's own metadata ----------------------------------------------------------
# Each invocation has a `custom_metadata` dict, in memory for the run and never stored (only RunConfig's is
# copied into events). Tools and callbacks read it as their context's `custom_metadata`; a plugin's
# `on_user_message_callback` gets the InvocationContext, whose dict a `CallbackContext` wraps. ADK copies an
# invocation context shallowly for its agent, so every context of one run shares the dict.


def run_metadata(context: InvocationContext) -> dict[str, Any]:
    """The run's own metadata dict: what its tools' and callbacks' `custom_metadata` show."""
    metadata: dict[str, Any] = CallbackContext(context).custom_metadata
    return metadata


# --- A stored session's version ----------------------------------------------------
# ADK's stale-session check compares a loaded session's `last_update_time` with the stored one's, kept in
# DatabaseSessionService's `StorageSession.update_time` (google.adk.sessions.schemas.v1) and in
# InMemorySessionService's `sessions[app][user][session]`. The guard reads it to skip reloading a
# conversation nobody wrote to since ADK loaded it; unknown (None), it reloads: one read more, no less safe.
try:
    from google.adk.sessions.schemas.v1 import StorageSession

    STORED_SESSION_VERSION: Select[datetime] | None = select(StorageSession.update_time).where(
        StorageSession.app_name == bindparam("app_name"), StorageSession.user_id == bindparam("user_id"),
        StorageSession.id == bindparam("session_id"))
except (ImportError, AttributeError):  # another storage layout: the version is not read
    STORED_SESSION_VERSION = None


def in_memory_version(service: InMemorySessionService, app_name: str, user_id: str, session_id: str) -> float | None:
    """The stored session's `last_update_time` in an InMemorySessionService, or None if it cannot be read."""
    try:
        stored = service.sessions[app_name][user_id][session_id]
    except (AttributeError, KeyError, TypeError):
        return None
    version = getattr(stored, "last_update_time", None)
    return version if isinstance(version, float) else None


# --- How ADK's evaluator runs one user turn ----------------------------------------
# `adk eval` and AgentEvaluator send each user turn of an eval case through the static async generator
# `EvaluationGenerator._generate_inferences_for_single_user_invocation(runner, user_id, session_id,
# user_content)`, which eval/resume_turns.py replaces. Without it, the eval runs its turns as written, and a
# resume case fails at its answer, as the warning logged here says.
EVALUATOR_TURN = "_generate_inferences_for_single_user_invocation"
EVALUATOR_TURN_PARAMETERS = ("runner", "user_id", "session_id", "user_content")
TurnStep = Callable[[Runner, str, str, types.Content], AsyncGenerator[Event, None]]
_adk_turn: list[TurnStep] = []  # ADK's own step, kept when it is replaced


def _evaluator() -> type:
    # Imported here: only a process that evaluates pays for ADK's evaluator.
    from google.adk.evaluation.evaluation_generator import EvaluationGenerator

    return EvaluationGenerator


def adk_evaluator_turn(runner: Runner, user_id: str, session_id: str,
                       user_content: types.Content) -> AsyncGenerator[Event, None]:
    """ADK's own step for one user turn of an eval case: the turn's events."""
    step = _adk_turn[0] if _adk_turn else getattr(_evaluator(), EVALUATOR_TURN)
    return step(runner, user_id, session_id, user_content)


def replace_evaluator_turn(replacement: TurnStep) -> bool:
    """Have ADK's evaluator run each user turn with `replacement` (once per process); False if it cannot."""
    evaluator = _evaluator()
    current = getattr(evaluator, EVALUATOR_TURN, None)
    if current is None:
        logger.warning("This google-adk release's evaluator has no %s step: the eval's resume turns are sent as "
                       "written, and each resume case fails at its answer. Run the eval on google-adk 2.8 to 2.13.",
                       EVALUATOR_TURN)
        return False
    if current is not replacement:
        _adk_turn[:] = [current]
        setattr(evaluator, EVALUATOR_TURN, staticmethod(replacement))
    return True


# --- ADK's refusals of a message that cannot resume ---------------------------------
# Runner.run_async raises these ValueErrors while it matches an incoming message to a pending call, before
# any plugin runs; ADK's /run answers them with a plain-text 500, /run_sse with an error event. They are the
# caller's mistake, so the server answers them as `invalid_function_response` (web/adk_wording.py). Each
# text starts a message; one a release words differently is an unexpected error (500, still JSON) until added.
RESUME_REFUSALS: dict[str, tuple[str, ...]] = {
    "unknown_id": ("Function call not found for function response ids",),
    # 2.8 to 2.10 save a response with no id, then fail to build the model's
    # request from it with the second text.
    "missing_id": ("Function response id is required", "No function call event found for function responses ids"),
    "text_with_response": ("Message cannot contain both function responses and text",),
    "several_invocations": ("Function responses resolve to multiple invocations",),
    "function_call_from_user": ("User message cannot contain function calls",),
}
# A response with no id is refused only on some of ADK's paths (a resumable app's, and 2.8 to 2.10 while
# building the model's request); on the others ADK starts a new turn without it, and the guard pays nothing.


def is_resume_refusal(message: str) -> bool:
    """Whether `message` is ADK's refusal of a message that cannot resume a pending call."""
    return message.startswith(tuple(text for texts in RESUME_REFUSALS.values() for text in texts))


# --- The dev UI's trace view -------------------------------------------------------
# get_fast_api_app gives the tracer provider two span processors whose exporters (classes of google.adk.cli) keep
# every span of the process for the dev UI's trace view, and never let one go (google/adk-python#6692): on 2.8 and
# 2.9 without the dev UI too, about 43 KiB a /run here, until the server runs out of memory. ADK adds them with
# `TracerProvider.add_span_processor`, on the global provider (2.13) or on one it then makes global (2.8).
ADKS_TRACE_VIEW = "google.adk.cli."


def feeds_trace_view(processor: SpanProcessor) -> bool:
    """Whether `processor` exports to ADK's own trace view."""
    return type(getattr(processor, "span_exporter", None)).__module__.startswith(ADKS_TRACE_VIEW)


@contextmanager
def no_trace_view() -> Iterator[None]:
    """Inside the block, a span processor exporting to ADK's own trace view is not added (other processors are)."""
    add = TracerProvider.add_span_processor

    def add_unless_adks(provider: TracerProvider, processor: SpanProcessor) -> None:
        if not feeds_trace_view(processor):
            add(provider, processor)

    setattr(TracerProvider, "add_span_processor", add_unless_adks)  # noqa: B010 (mypy: no assigning to a method)
    try:
        yield
    finally:
        setattr(TracerProvider, "add_span_processor", add)  # noqa: B010
