"""What the app assumes of ADK's private parts and error texts, checked on the installed google-adk.

Each assumption lives in long_running_agent/adk_compat.py; each test here
fails with a message naming the one a google-adk release breaks. `make
test-adk` runs this file on every supported release. The last tests check
that no other module of the app touches an underscore name of ADK or
matches the words of ADK's errors.
"""

from __future__ import annotations

import ast
import inspect
import logging
import re
from datetime import UTC
from pathlib import Path

import google.adk
import google.adk.models as adk_models
import pytest
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.cli.utils.local_storage import PerAgentDatabaseSessionService, create_local_session_service
from google.adk.events import Event
from google.adk.models import BaseLlm
from google.adk.runners import Runner
from google.adk.sessions import DatabaseSessionService, InMemorySessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from support.models import ScriptedModel
from support.processes import ROOT
from support.servers import span_processors, take_off

from long_running_agent import adk_compat
from long_running_agent.model.offline import OfflineExpenseModel
from long_running_agent.web import create_server

ADK_SOURCE = Path(google.adk.__file__).parent
APP_FOLDER = "long_running_agent"


def broken(assumption: str, detail: str) -> str:
    return f"google-adk {google.adk.__version__} breaks adk_compat.{assumption}: {detail}"


# --- A model's declared capabilities ---------------------------------------------


def test_llm_capabilities_is_adks_class_where_adk_asks_a_model_for_them():
    asks = "capabilities" in dir(BaseLlm)
    exported = getattr(adk_models, "LlmCapabilities", None)
    if asks:
        assert adk_compat.LlmCapabilities is exported, broken(
            "LlmCapabilities", "BaseLlm has `capabilities`, but google.adk.models exports no LlmCapabilities")
        model = OfflineExpenseModel(model="offline-expense-model")
        assert isinstance(model.capabilities, exported), broken(
            "LlmCapabilities", "the offline model's declared capabilities are not ADK's class")
    else:
        assert exported is None and adk_compat.LlmCapabilities.__module__ == adk_compat.__name__, broken(
            "LlmCapabilities", "google.adk.models exports LlmCapabilities, but BaseLlm asks no model for it")


# --- Where a session store keeps its sessions --------------------------------------


async def test_per_agent_routing_names_the_sqlite_file_plain_adk_commands_use(tmp_path):
    service = create_local_session_service(base_dir=tmp_path, per_agent=True)
    assert isinstance(service, PerAgentDatabaseSessionService), broken(
        "per_agent_store", "the per-agent local storage of plain `adk` commands is no PerAgentDatabaseSessionService")
    assert callable(getattr(service, adk_compat.PER_AGENT_ROUTING, None)), broken(
        "PER_AGENT_ROUTING", f"PerAgentDatabaseSessionService has no {adk_compat.PER_AGENT_ROUTING}(app_name)")
    store = await adk_compat.per_agent_store(service, APP_FOLDER)
    assert isinstance(store, SqliteSessionService), broken(
        "PER_AGENT_ROUTING", f"{adk_compat.PER_AGENT_ROUTING}(app_name) returned {type(store).__name__}, "
        "not the app's SqliteSessionService")
    opened = adk_compat.sqlite_file(store)
    assert opened is not None, broken("SQLITE_FILE", "the app's SqliteSessionService does not name its file")
    where = Path(opened).resolve().relative_to(tmp_path.resolve())
    fallback = adk_compat.PER_AGENT_SESSION_FILE.relative_to(adk_compat.PER_AGENT_SESSION_FILE.parents[2])
    assert where == fallback, broken(
        "PER_AGENT_SESSION_FILE", f"plain `adk` commands keep the app's sessions in {where}, not {fallback}")


async def test_without_per_agent_routing_the_store_is_the_file_adk_would_use():
    class WithoutRouting:
        pass

    store = await adk_compat.per_agent_store(WithoutRouting(), APP_FOLDER)  # type: ignore[arg-type]
    assert store == adk_compat.PER_AGENT_SESSION_FILE
    assert store.parent.parent.name == APP_FOLDER


def test_sqlite_store_names_the_file_it_opens(tmp_path):
    path = tmp_path / "sessions.db"
    service = SqliteSessionService(str(path))
    assert adk_compat.sqlite_file(service) == str(path), broken(
        "SQLITE_FILE", f"SqliteSessionService keeps no {adk_compat.SQLITE_FILE} naming the file it opens")


def test_a_sqlite_store_that_does_not_say_its_file_is_not_named():
    class WithoutPath:
        pass

    assert adk_compat.sqlite_file(WithoutPath()) is None  # type: ignore[arg-type]


# --- A stored session's version ----------------------------------------------------


async def test_the_stored_version_is_read_where_adks_database_store_keeps_it(tmp_path):
    assert adk_compat.STORED_SESSION_VERSION is not None, broken(
        "STORED_SESSION_VERSION", "google.adk.sessions.schemas.v1 has no StorageSession with update_time")
    service = DatabaseSessionService(f"sqlite+aiosqlite:///{tmp_path / 'sessions.db'}")
    try:
        session = await service.create_session(app_name=APP_FOLDER, user_id="alice")
        await service.append_event(session, Event(author="user", content=types.Content(
            role="user", parts=[types.Part(text="hello")])))
        async with service.db_engine.connect() as db:
            stored = await db.scalar(adk_compat.STORED_SESSION_VERSION, {
                "app_name": APP_FOLDER, "user_id": "alice", "session_id": session.id})
    finally:
        await service.close()
    assert stored is not None, broken("STORED_SESSION_VERSION", "the query finds no row for a stored session")
    seen = (stored if stored.tzinfo else stored.replace(tzinfo=UTC)).timestamp()
    assert seen == pytest.approx(session.last_update_time, abs=1e-3), broken(
        "STORED_SESSION_VERSION", f"update_time {seen} is not the session's last_update_time "
        f"{session.last_update_time}, which ADK's stale-session check compares")


async def test_the_stored_version_is_read_where_adks_memory_store_keeps_it():
    service = InMemorySessionService()
    session = await service.create_session(app_name=APP_FOLDER, user_id="alice")
    await service.append_event(session, Event(author="user", content=types.Content(
        role="user", parts=[types.Part(text="hello")])))
    version = adk_compat.in_memory_version(service, APP_FOLDER, "alice", session.id)
    assert version == session.last_update_time, broken(
        "in_memory_version", f"InMemorySessionService.sessions[app][user][id] gives {version}, "
        f"not the session's last_update_time {session.last_update_time}")


def test_a_memory_store_laid_out_otherwise_gives_no_version_and_the_guard_reloads():
    class Elsewhere:
        sessions = ["not", "a", "mapping"]

    assert adk_compat.in_memory_version(Elsewhere(), APP_FOLDER, "alice", "s1") is None  # type: ignore[arg-type]
    assert adk_compat.in_memory_version(InMemorySessionService(), APP_FOLDER, "alice", "nope") is None


# --- How ADK's evaluator runs one user turn ----------------------------------------


def test_the_evaluators_per_turn_step_is_a_static_generator_of_one_turns_events():
    from google.adk.evaluation.evaluation_generator import EvaluationGenerator

    name = adk_compat.EVALUATOR_TURN
    found = inspect.getattr_static(EvaluationGenerator, name, None)
    assert isinstance(found, staticmethod), broken("EVALUATOR_TURN", f"EvaluationGenerator has no static {name}")
    own = adk_compat._adk_turn[0] if adk_compat._adk_turn else getattr(EvaluationGenerator, name)
    assert inspect.isasyncgenfunction(own), broken("EVALUATOR_TURN", f"{name} is no async generator")
    parameters = tuple(inspect.signature(own).parameters)
    assert parameters == adk_compat.EVALUATOR_TURN_PARAMETERS, broken(
        "EVALUATOR_TURN_PARAMETERS", f"{name} takes {parameters}")
    source = inspect.getsource(EvaluationGenerator)
    assert len(re.findall(rf"\b{name}\(", source)) >= 2, broken(
        "EVALUATOR_TURN", f"EvaluationGenerator no longer sends each user turn through {name}")


def test_without_the_per_turn_step_the_eval_runs_as_written_and_says_so(monkeypatch, caplog):
    class Evaluator:
        pass

    monkeypatch.setattr(adk_compat, "_evaluator", lambda: Evaluator)

    async def replacement(runner, user_id, session_id, user_content):  # pragma: no cover - never run
        yield None

    with caplog.at_level(logging.WARNING, logger=adk_compat.__name__):
        assert adk_compat.replace_evaluator_turn(replacement) is False
    assert not hasattr(Evaluator, adk_compat.EVALUATOR_TURN)
    assert [record.levelno for record in caplog.records] == [logging.WARNING]
    assert adk_compat.EVALUATOR_TURN in caplog.records[0].getMessage()


# --- ADK's refusals of a message that cannot resume ---------------------------------


def _call(call_id: str, invocation_id: str) -> Event:
    part = types.Part(function_call=types.FunctionCall(id=call_id, name="ask_for_approval", args={}))
    return Event(invocation_id=invocation_id, author="compat", content=types.Content(role="model", parts=[part]),
                 long_running_tool_ids={call_id})


def _answer(call_id: str | None) -> types.Part:
    return types.Part(function_response=types.FunctionResponse(id=call_id, name="ask_for_approval",
                                                               response={"status": "approved"}))


MESSAGES = {
    "unknown_id": [_answer("no-such-call")],
    "missing_id": [_answer(None)],
    "text_with_response": [_answer("call-1"), types.Part(text="approved")],
    "several_invocations": [_answer("call-1"), _answer("call-2")],
    "function_call_from_user": [types.Part(function_call=types.FunctionCall(id="x", name="reimburse", args={}))],
}


# ADK refuses a response with no id only on some paths (adk_compat.py); on the
# others it takes the message for a new turn.
REFUSED_ON_SOME_PATHS = {"missing_id"}


@pytest.mark.parametrize("refusal", sorted(adk_compat.RESUME_REFUSALS))
async def test_adk_refuses_a_message_that_cannot_resume_in_the_words_the_server_recognises(refusal):
    sessions = InMemorySessionService()
    session = await sessions.create_session(app_name="compat", user_id="u")
    for event in (_call("call-1", "invocation-1"), _call("call-2", "invocation-2")):
        await sessions.append_event(session, event)
    app = App(name="compat", root_agent=LlmAgent(name="compat", model=ScriptedModel()))
    runner = Runner(app=app, session_service=sessions)
    message = types.Content(role="user", parts=MESSAGES[refusal])
    try:
        async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            pass
    except ValueError as error:
        refused = str(error)
    except Exception:  # the scripted model refuses every call: ADK ran the message as a turn
        refused = None
    else:
        refused = None
    if refused is None and refusal in REFUSED_ON_SOME_PATHS:
        pytest.skip(f"google-adk {google.adk.__version__} runs this message as a new turn here")
    assert refused is not None, broken(f'RESUME_REFUSALS["{refusal}"]', "ADK no longer refuses this message")
    assert adk_compat.is_resume_refusal(refused), broken(
        f'RESUME_REFUSALS["{refusal}"]', f"ADK now refuses with {refused[:120]!r}")
    assert refused.startswith(adk_compat.RESUME_REFUSALS[refusal]), broken(
        f'RESUME_REFUSALS["{refusal}"]', f"ADK refuses with {refused[:120]!r}")


# --- The dev UI's trace view ---------------------------------------------------------


@pytest.mark.parametrize("production", [False, True], ids=["dev UI", "production"])
async def test_only_a_server_with_the_dev_ui_keeps_spans_for_adks_trace_view(desk, configure, monkeypatch, production):
    """ADK 2.8 and 2.9 keep them without the dev UI too, in every span until the server runs out of memory."""
    configure(production=production, trusted_user_header="X-Forwarded-User" if production else None)
    added, add = [], TracerProvider.add_span_processor

    def adding(provider: TracerProvider, processor: SpanProcessor) -> None:
        added.append(processor)
        add(provider, processor)

    monkeypatch.setattr(TracerProvider, "add_span_processor", adding)
    before = span_processors()
    create_server(desk)
    take_off([p for p in span_processors() if p not in before])
    kept = [p for p in added if adk_compat.feeds_trace_view(p)]
    if production:
        assert kept == [], f"a server without the dev UI keeps every span for ADK's trace view: {kept}"
    else:  # what no_trace_view() leaves out is what ADK adds
        assert len(kept) == 2, broken("ADKS_TRACE_VIEW", f"the dev server's span processors are {added}")


# --- Nobody else touches ADK's private parts ------------------------------------------


def _app_sources() -> dict[Path, ast.Module]:
    paths = [ROOT / "main.py", *sorted((ROOT / "long_running_agent").rglob("*.py"))]
    return {path: ast.parse(path.read_text()) for path in paths if path.name != "adk_compat.py"}


def _private_names_of(source: str) -> set[str]:
    """The underscore names a source defines: functions, classes and attributes it sets on `self`."""
    pairs = re.findall(r"(?:def|class)\s+(_[A-Za-z]\w*)|self\.(_[A-Za-z]\w*)\s*[:=]", source)
    return {name for pair in pairs for name in pair if name}


def _adk_private_names() -> set[str]:
    names: set[str] = set()
    for path in ADK_SOURCE.rglob("*.py"):
        names |= _private_names_of(path.read_text(errors="replace"))
    return names


def test_no_module_but_the_adapter_touches_an_underscore_name_of_adk():
    sources = _app_sources()
    ours = {name for path in sources for name in _private_names_of(path.read_text())}
    adks = _adk_private_names() - ours
    found = []
    for path, tree in sources.items():
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("google.adk"):
                private = [part for part in node.module.split(".") if part.startswith("_")]  # type: ignore[union-attr]
                private += [alias.name for alias in node.names if alias.name.startswith("_")]
                found += [f"{where}:{node.lineno} imports {name} from {node.module}" for name in private]
            elif isinstance(node, ast.Import):
                found += [f"{where}:{node.lineno} imports {alias.name}" for alias in node.names
                          if alias.name.startswith("google.adk") and "._" in alias.name]
            elif isinstance(node, ast.Attribute) and node.attr in adks:
                found.append(f"{where}:{node.lineno} reads ADK's {node.attr}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in adks:
                found.append(f"{where}:{node.lineno} names ADK's {node.value}")
    assert found == [], "ADK's private names belong in long_running_agent/adk_compat.py"


def _adk_error_texts() -> set[str]:
    """The fixed start of every message ADK raises an exception with (at least 20 characters)."""
    texts = set()
    for path in ADK_SOURCE.rglob("*.py"):
        source = path.read_text(errors="replace")
        if "raise " not in source:  # half of ADK's files raise nothing: not worth parsing
            continue
        for node in ast.walk(ast.parse(source)):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args):
                continue
            first = node.exc.args[0]
            if isinstance(first, ast.JoinedStr):
                first = first.values[0] if first.values else first
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and len(first.value.strip()) >= 20:
                texts.add(first.value.strip())
    return texts


def test_no_module_but_the_adapter_matches_the_words_of_adks_errors():
    adks = _adk_error_texts()
    assert any(text.startswith(adk_compat.RESUME_REFUSALS["unknown_id"]) for text in adks), broken(
        "RESUME_REFUSALS", "the scan of ADK's raise statements found none of the refusals it knows")
    found = []
    for path, tree in _app_sources().items():
        for node in ast.walk(tree):
            # A phrase, not a name: ADK's messages mention settings such as GOOGLE_CLOUD_PROJECT too.
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= 20 \
                    and " " in node.value.strip():
                if any(node.value in text for text in adks):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert found == [], "matches on ADK's error texts belong in long_running_agent/adk_compat.py"
