"""examples/bare/ is the seed's pattern, runnable as printed: its driver, and plain `adk web` on its folder.

The driver takes the five steps in one conversation: a request, the pending `ask_for_approval` call found
through `long_running_tool_ids`, and a FunctionResponse written by hand with that call's id and name,
which nothing checks, so `reimburse` pays. No key is needed: the example runs on the project's offline model.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Iterator
from types import ModuleType

import httpx
import pytest
from google.adk.events import Event
from google.adk.runners import InMemoryRunner
from support.processes import ROOT
from support.project import plain_adk, plain_env

from long_running_agent.model.choice import choose_model
from long_running_agent.model.offline import OFFLINE_MODEL_NAME
from long_running_agent.settings import model_settings

EXAMPLE = ROOT / "examples" / "bare"
APP = "expense_agent"  # the agent package's folder: the app name plain adk gives it


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """examples/bare first on sys.path, as for its main.py, and its agent imported afresh: it reads the environment."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    forget = ("expense_agent.agent", "expense_agent")
    for name in forget:
        sys.modules.pop(name, None)
    yield
    for name in forget:
        sys.modules.pop(name, None)


@pytest.fixture
def driver(example: None) -> ModuleType:
    """examples/bare/main.py as a module, importing its agent as `python examples/bare/main.py` does."""
    spec = importlib.util.spec_from_file_location("bare_main", EXAMPLE / "main.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pending(events: list[Event]) -> list[tuple[int, str | None, str | None]]:
    """(position, id, name) of each call the agent waits on: those ADK lists in long_running_tool_ids."""
    return [(i, call.id, call.name) for i, event in enumerate(events) for call in event.get_function_calls()
            if call.id in (event.long_running_tool_ids or set())]


async def test_the_hand_made_function_response_resumes_the_pending_call_and_reimburse_pays_once(driver):
    runner = InMemoryRunner(agent=driver.root_agent, app_name=APP)
    assert driver.root_agent.model == OFFLINE_MODEL_NAME

    session_id = await driver.run(runner)

    session = await runner.session_service.get_session(app_name=APP, user_id=driver.USER, session_id=session_id)
    assert session is not None
    events = session.events
    [(asked_at, call_id, name)] = _pending(events)
    assert name == "ask_for_approval"
    # The resume: a user message whose one part answers that very call, by id and name.
    [(answered_at, answer)] = [(i, r) for i, e in enumerate(events) if e.author == "user"
                               for r in e.get_function_responses()]
    assert (answer.id, answer.name, answer.response) == (call_id, name, {"status": "approved"})
    assert asked_at < answered_at
    # reimburse ran once, only after the answer, and paid what was asked.
    paid = [(i, r.response) for i, e in enumerate(events) for r in e.get_function_responses() if r.name == "reimburse"]
    assert [(i > answered_at, response["status"], response["amount"]) for i, response in paid] == [
        (True, "paid", 250.0)]


@pytest.mark.subprocess
def test_the_driver_runs_with_no_key_and_ends_with_one_payout():
    done = subprocess.run([sys.executable, "examples/bare/main.py"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"Model: {OFFLINE_MODEL_NAME}"
    [pending] = [line for line in lines if line.startswith("pending  | id=")]
    call_id = pending.split("id=", 1)[1].split()[0]
    [resume] = [line for line in lines if line.startswith("user     | FunctionResponse(")]
    assert f"id={call_id}, name=ask_for_approval," in resume
    reimburse_calls = [i for i, line in enumerate(lines) if "calls reimburse(" in line]
    assert len(reimburse_calls) == 1 and reimburse_calls[0] > lines.index(resume)
    assert sum("reimburse -> {'status': 'paid'" in line for line in lines) == 1


@pytest.mark.parametrize("environment", [
    {},
    {"GOOGLE_API_KEY": "a-key"},
    {"GEMINI_API_KEY": "a-key"},
    {"AGENT_MODEL": "gemini-2.5-pro"},
])
def test_the_example_runs_the_model_the_product_would(monkeypatch, example, environment):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    agent = importlib.import_module("expense_agent.agent")

    assert agent.MODEL == choose_model(model_settings()).name


@pytest.mark.subprocess
def test_plain_adk_web_on_the_example_folder_lists_it_and_its_answer_box_pays(tmp_path):
    project, home = tmp_path / "project", tmp_path / "home"
    shutil.copytree(EXAMPLE, project / "examples" / "bare", ignore=shutil.ignore_patterns(".adk", "__pycache__"))
    # No AGENT_MODEL from a developer's .env: the offline model, as for a new user with no key.
    with plain_adk("web", project, home, "examples/bare", env=plain_env(home, AGENT_MODEL="")) as adk:
        listed = httpx.get(f"{adk.base_url}/list-apps", timeout=30)
        assert listed.status_code == 200 and listed.json() == [APP]

        session = httpx.post(f"{adk.base_url}/apps/{APP}/users/alice/sessions", json={}, timeout=30).json()["id"]
        body = {"appName": APP, "userId": "alice", "sessionId": session}
        asked = _run(adk.base_url, body, {"role": "user", "parts": [{"text": "Reimburse $250 for the team lunch"}]})
        [call_id] = [i for event in asked for i in event.get("longRunningToolIds") or []]
        # What the dev UI sends for `approved` typed into the answer box.
        answer = {"functionResponse": {"id": call_id, "name": "ask_for_approval", "response": {"result": "approved"}}}
        resumed = _run(adk.base_url, body, {"role": "user", "parts": [answer]})

    paid = [part["functionResponse"]["response"] for event in resumed for part in event["content"]["parts"]
            if part.get("functionResponse", {}).get("name") == "reimburse"]
    assert [(p["status"], p["amount"]) for p in paid] == [("paid", 250)]


def _run(base_url: str, body: dict, message: dict) -> list[dict]:
    response = httpx.post(f"{base_url}/run", json=body | {"newMessage": message}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()
