"""A Gemini that cannot be reached, or that refuses, is one paragraph saying what to check, on every surface.

Gemini's address is a closed loopback port (the network), or tests/support/fake_gemini.py answering as
Gemini does for a bad key, an unknown model, a used-up quota and a failure of its own. The demo
(`python main.py`) and the approver CLI (`.venv/bin/expenses`) print one line and exit 1, with no traceback
unless --verbose; `make web` answers /run and /run_sse with `{error, message, fix}` and logs the failure
once, as the same paragraph. The address named is the one the settings say google-genai calls
(GOOGLE_GEMINI_BASE_URL), handed to the agent's model-error callback.
The kind of failure is asserted through its next step in the catalogue (refusals/), not its wording.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.auth.exceptions import DefaultCredentialsError
from support.cli import expenses
from support.fake_gemini import BAD_KEY, OUTAGE, QUOTA, UNKNOWN_MODEL, Failure, FakeGemini
from support.http import assert_error, run_body, user_text
from support.processes import run
from support.servers import LUNCH, free_port, web_server

from long_running_agent.model.failure import unavailable
from long_running_agent.refusals.model import ModelUnavailable
from long_running_agent.settings import GEMINI_ADDRESS, load_settings

MODEL = "gemini-3.5-flash"
ANSWERS: dict[str, Failure | None] = {
    "network": None, "key": BAD_KEY, "model": UNKNOWN_MODEL, "quota": QUOTA, "service": OUTAGE,
}
# A Gemini key, and nothing in the developer's shell that would send google-genai elsewhere.
GEMINI = {"AGENT_MODEL": MODEL, "GOOGLE_API_KEY": "test-key-not-a-real-one", "GEMINI_API_KEY": "",
          "GOOGLE_GENAI_USE_VERTEXAI": "", "GOOGLE_GENAI_USE_ENTERPRISE": "", "GOOGLE_GENAI_API_VERSION": ""}


@contextmanager
def gemini_failing(kind: str, times: int = 1) -> Iterator[str]:
    """The address of a Gemini failing as `kind` says, `times` times: a closed port, or the fake's error answer."""
    answer = ANSWERS[kind]
    if answer is None:
        yield f"http://127.0.0.1:{free_port()}"  # nothing listens there once free_port has closed it
        return
    with FakeGemini([answer] * times) as fake:
        yield fake.base_url
    assert not fake.errors, fake.errors


def assert_one_paragraph(stderr: str, kind: str, address: str) -> None:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert address in lines[0] and lines[0].endswith(ModelUnavailable.NEXT[kind]), stderr


@pytest.mark.parametrize("kind", list(ANSWERS))
def test_the_cli_says_in_one_line_what_failed_and_what_to_check(kind, tmp_path):
    with gemini_failing(kind) as address:
        result = expenses("request", LUNCH, "--user", "alice", url=f"sqlite+aiosqlite:///{tmp_path}/e.db",
                     env=GEMINI | {"GOOGLE_GEMINI_BASE_URL": address})
    assert result.returncode == 1, result.stdout + result.stderr
    assert_one_paragraph(result.stderr, kind, address)
    assert "is pending" not in result.stdout


@pytest.mark.subprocess
@pytest.mark.parametrize(("args", "kind"), [((), "network"), (("--text", "Reimburse $45 for a taxi"), "key")])
def test_the_demo_says_in_one_line_what_failed_and_what_to_check(args, kind, tmp_path):
    with gemini_failing(kind) as address:
        result = run(*args, url=f"sqlite+aiosqlite:///{tmp_path}/e.db",
                     env=GEMINI | {"GOOGLE_GEMINI_BASE_URL": address})
    assert result.returncode == 1, result.stdout + result.stderr
    assert_one_paragraph(result.stderr, kind, address)


def test_gemini_named_with_no_key_at_all_says_to_set_one(tmp_path):
    result = expenses("request", LUNCH, "--user", "alice", url=f"sqlite+aiosqlite:///{tmp_path}/e.db",
                 env=GEMINI | {"GOOGLE_API_KEY": "", "GOOGLE_GEMINI_BASE_URL": ""})
    assert result.returncode == 1, result.stdout + result.stderr
    assert_one_paragraph(result.stderr, "credentials", GEMINI_ADDRESS)


@pytest.mark.subprocess
def test_verbose_shows_adks_tracebacks_as_well(tmp_path):
    with gemini_failing("network") as address:
        result = run("--verbose", "--text", "Reimburse $45 for a taxi", url=f"sqlite+aiosqlite:///{tmp_path}/e.db",
                     env=GEMINI | {"GOOGLE_GEMINI_BASE_URL": address})
    assert result.returncode == 1
    assert "Traceback" in result.stderr
    assert result.stderr.strip().splitlines()[-1].endswith(ModelUnavailable.NEXT["network"])


ELSEWHERE = "http://127.0.0.1:9"  # an address of the caller's: the settings' `model.gemini_address`


def test_only_geminis_own_failures_become_model_unavailable():
    # The offline model (or a test's scripted one) failing is no network failure of Gemini's.
    assert unavailable(ConnectionRefusedError("refused"), "offline-expense-model", GEMINI_ADDRESS) is None
    assert unavailable(ValueError("a bug"), MODEL, GEMINI_ADDRESS) is None
    failure = unavailable(httpx.ConnectError("All connection attempts failed"), MODEL, GEMINI_ADDRESS)
    assert failure is not None and failure.kind == "network" and failure.code == "model_unavailable"
    no_credentials = unavailable(DefaultCredentialsError("Your default credentials were not found."), MODEL,
                                 GEMINI_ADDRESS)
    assert no_credentials is not None and no_credentials.kind == "credentials"
    # The address named is the one it is handed, not one it looks up.
    elsewhere = unavailable(httpx.ConnectError("All connection attempts failed"), MODEL, ELSEWHERE)
    assert elsewhere is not None and ELSEWHERE in str(elsewhere) and GEMINI_ADDRESS not in str(elsewhere)


@pytest.mark.parametrize("agent_model", [None, MODEL])
def test_the_settings_read_the_address_google_genai_calls(monkeypatch, agent_model):
    # What the surfaces above name: the settings' `model.gemini_address`, which agent.py hands model_failed.
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", f"{ELSEWHERE}/")
    if agent_model:
        monkeypatch.setenv("AGENT_MODEL", agent_model)
    assert load_settings().model.gemini_address == ELSEWHERE


# --- make web ------------------------------------------------------------------------------


def sse_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line.removeprefix("data:")) for line in text.splitlines() if line.startswith("data:")]


@pytest.mark.subprocess
def test_make_web_answers_json_and_logs_one_paragraph(tmp_path: Path):
    with gemini_failing("key", times=2) as address, \
            web_server(tmp_path, **GEMINI, GOOGLE_GEMINI_BASE_URL=address) as server, \
            httpx.Client(base_url=server.base_url, timeout=60) as client:
        session_id = new_session_sync(client)
        body = assert_error(client.post("/run", json=run_body("alice", session_id, user_text(LUNCH))),
                            502, "model_unavailable")
        assert address in body["message"] and body["fix"] == ModelUnavailable.NEXT["key"]

        streamed = client.post("/run_sse", json=run_body("alice", session_id, user_text(LUNCH)))
        events = sse_events(streamed.text)
        # The event the dev UI shows in the chat, then the end of the stream, as the API words it.
        failed = [e for e in events if e.get("errorCode")]
        assert [e["errorCode"] for e in failed] == ["model_unavailable"], events
        assert failed[0]["errorMessage"].endswith(ModelUnavailable.NEXT["key"])
        assert events[-1] == body, events
        time.sleep(0.5)  # the server's log lines of the last request
        log = server.log.read_text()
    assert "Traceback" not in log, log
    assert log.count(ModelUnavailable.NEXT["key"]) == 2, log  # once for each failed run


def new_session_sync(client: httpx.Client) -> str:
    response = client.post("/apps/long_running_agent/users/alice/sessions", json={})
    assert response.status_code == 200, response.text
    return response.json()["id"]
