"""Plain `adk api_server` and `adk run`, with no flags, decided by `python main.py`.

ADK's own commands keep sessions in `long_running_agent/.adk/session.db`;
`main.py` and `make web` keep theirs in the app's database. Each ticket
records which, and a decision made anywhere reaches the conversation there.
Each test runs a fresh copy of the project with no .env (support/project.py).
"""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
from support.environment import app_variables
from support.fake_gemini import BAD_KEY, FakeGemini
from support.http import as_approver, json_texts, run_body, user_text
from support.processes import ROOT
from support.project import ADK, cloned_project, expenses, fresh_project, plain_adk, plain_env, ticket_in
from support.servers import APP, LUNCH, web_server

from long_running_agent.refusals.model import ModelUnavailable

pytestmark = pytest.mark.subprocess

# ADK's per-agent store, relative to the project folder.
ADK_SESSIONS = Path("long_running_agent") / ".adk" / "session.db"


def ask(server, user: str, session_id: str, text: str) -> list[dict]:
    response = httpx.post(f"{server.base_url}/run", json=run_body(user, session_id, user_text(text)), timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def new_session(server, user: str) -> str:
    response = httpx.post(f"{server.base_url}/apps/{APP}/users/{user}/sessions", json={}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["id"]


def events_of(server, user: str, session_id: str) -> list[dict]:
    response = httpx.get(f"{server.base_url}/apps/{APP}/users/{user}/sessions/{session_id}", timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["events"]


def payouts_in(events: list[dict]) -> list[dict]:
    return [part["functionResponse"]["response"] for event in events
            for part in (event.get("content") or {}).get("parts", [])
            if part.get("functionResponse", {}).get("name") == "reimburse"]


@pytest.mark.parametrize("command", ["web", "api_server"])
def test_plain_adk_from_the_project_folder_lists_only_the_app(tmp_path, command):
    # The whole clone: the dev UI's loader looks for apps in every folder below it. ADK releases that walk nested
    # folders list the examples too (examples/bare, examples/a2a_requester), as `adk web examples` does alone.
    with plain_adk(command, cloned_project(tmp_path), tmp_path / "home") as server:
        listed = httpx.get(f"{server.base_url}/list-apps", timeout=30)

    assert listed.status_code == 200 and APP in listed.json()
    assert set(listed.json()) <= {APP, "examples.bare.expense_agent", "examples.a2a_requester"}, listed.json()


def test_ticket_from_plain_api_server_is_paid_by_main_py_approve(tmp_path):
    project, home = fresh_project(tmp_path), tmp_path / "home"
    with plain_adk("api_server", project, home) as server:
        session_id = new_session(server, "alice")
        ticket_id = ticket_in(" ".join(json_texts(ask(server, "alice", session_id, LUNCH))))

        approved = expenses(project, home, "approve", ticket_id, "--approver", "bob")

        assert approved.returncode == 0, approved.stderr
        assert "Traceback" not in approved.stderr
        assert str(project / ADK_SESSIONS) in approved.stdout  # said where the conversation was
        # ADK's server reads the same file: the conversation shows the payout.
        [paid] = payouts_in(events_of(server, "alice", session_id))
        assert paid["status"] == "paid" and paid["ticket_id"] == ticket_id

        # A second approval, or a re-delivery, changes nothing.
        again = expenses(project, home, "deliver", ticket_id)
        assert again.returncode == 0 and "nothing to do" in again.stdout
        assert len(payouts_in(events_of(server, "alice", session_id))) == 1
    shown = expenses(project, home, "show", ticket_id)
    assert shown.stdout.count(" paid ") == 1 and shown.stdout.count(" delivered ") == 1, shown.stdout


def test_unreachable_conversation_gets_a_clear_message_then_delivers_on_the_next_message(tmp_path):
    project, home = fresh_project(tmp_path), tmp_path / "home"
    # Sessions kept in the server's memory: no other process can reach them.
    with plain_adk("api_server", project, home, "--session_service_uri", "memory://") as server:
        session_id = new_session(server, "alice")
        ticket_id = ticket_in(" ".join(json_texts(ask(server, "alice", session_id, LUNCH))))

        approved = expenses(project, home, "approve", ticket_id, "--approver", "bob")

        assert approved.returncode == 3, (approved.stdout, approved.stderr)
        assert "Traceback" not in approved.stderr + approved.stdout
        assert f"Ticket {ticket_id} is approved by bob (recorded in the ledger)" in approved.stderr
        assert "memory of process" in approved.stderr and "next writes" in approved.stderr
        assert payouts_in(events_of(server, "alice", session_id)) == []

        # The requester's next message: the recorded decision is delivered first.
        ask(server, "alice", session_id, "any news?")

        [paid] = payouts_in(events_of(server, "alice", session_id))
        assert paid["status"] == "paid" and paid["ticket_id"] == ticket_id


def test_a_conversation_deleted_and_started_again_empty_gets_its_decision_recorded_and_settled(tmp_path):
    project, home = fresh_project(tmp_path), tmp_path / "home"
    with plain_adk("api_server", project, home) as server:
        session_id = new_session(server, "alice")
        ticket_id = ticket_in(" ".join(json_texts(ask(server, "alice", session_id, LUNCH))))
        # Nothing of this app guards ADK's own routes here: the conversation is deleted, and an
        # empty one is created under the same id. It exists, but holds no call to answer.
        session_url = f"{server.base_url}/apps/{APP}/users/alice/sessions"
        assert httpx.delete(f"{session_url}/{session_id}", timeout=30).status_code == 200
        assert httpx.post(session_url, json={"sessionId": session_id}, timeout=30).status_code == 200

        approved = expenses(project, home, "approve", ticket_id, "--approver", "bob")
        redelivered = expenses(project, home, "deliver", ticket_id)
        # The requester writes in the new conversation: answered, not failed on the decision it cannot take.
        ask(server, "alice", session_id, "any news?")

        for attempt in (approved, redelivered):
            assert attempt.returncode == 3, (attempt.stdout, attempt.stderr)
            assert "Traceback" not in attempt.stdout + attempt.stderr
            assert f"expenses settle {ticket_id} --approver" in attempt.stderr
        assert payouts_in(events_of(server, "alice", session_id)) == []

        settled = expenses(project, home, "settle", ticket_id, "--approver", "bob")
        assert settled.returncode == 0, (settled.stdout, settled.stderr)
        assert "Traceback" not in settled.stdout + settled.stderr
        assert re.search(r"paid \$250\.00 \(P-[0-9a-f]{12}\)", settled.stdout), settled.stdout

    shown = expenses(project, home, "show", ticket_id)
    assert shown.returncode == 0, shown.stderr
    # Each failed attempt is in the history with its time; the payout once.
    attempts = re.findall(r"^  (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)  undelivered +by ([^:]+):", shown.stdout, re.M)
    assert [by for _at, by in attempts] == ["bob", "approver CLI", "approval_guard"], shown.stdout
    assert re.search(rf"^Delivered: never; settled by bob .*last attempt failed at {attempts[-1][0]}", shown.stdout,
                     re.M), shown.stdout
    assert len(re.findall(r"^Paid: P-[0-9a-f]{12} \$250\.00 ", shown.stdout, re.M)) == 1, shown.stdout


class Terminal:
    """`adk run` driven through its stdin, as a person at a terminal would."""

    def __init__(self, project: Path, home: Path) -> None:
        self.process = subprocess.Popen([str(ADK), "run", "long_running_agent"], cwd=project,
                                        env=plain_env(home), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)

    def type(self, text: str) -> None:
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()

    def wait_for(self, needle: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if needle in line:
                return line
        raise AssertionError(f"{needle!r} never appeared in:\n{''.join(self.seen)[-3000:]}")

    def ask(self, text: str) -> str:
        """Type a request; its ticket id, once `adk run` waits at the HITL prompt for the call's answer."""
        self.type(text)
        ticket_id = ticket_in(self.wait_for("is waiting for an approver"))
        self.wait_for("[HITL] Waiting for input for ask_for_approval")
        return ticket_id

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def test_adk_run_refuses_the_typed_answer_and_hears_the_decision_made_elsewhere(tmp_path):
    project, home = fresh_project(tmp_path), tmp_path / "home"
    terminal = Terminal(project, home)
    try:
        ticket_id = terminal.ask(LUNCH)
        # ADK's own user asks, as the README says where it shows `adk run`, and cannot approve its own ticket.
        requester = re.search(r'"requested_by": "(\w+)"', expenses(project, home, "show", ticket_id).stdout)
        assert requester and f"`{requester[1]}`" in (ROOT / "README.md").read_text().split(
            "### In plain `adk web`")[1].split("\n### ")[0]
        own = expenses(project, home, "approve", ticket_id, "--approver", requester[1])
        assert own.returncode == 1 and f"{requester[1]} requested ticket {ticket_id}" in own.stderr
        terminal.type("approved")  # ADK sends this as the call's answer; only an approver may decide
        note = terminal.wait_for("not accepted")
        assert f"expenses approve {ticket_id}" in note

        approved = expenses(project, home, "approve", ticket_id, "--approver", "bob")
        assert approved.returncode == 0, approved.stderr

        terminal.type("any news?")
        news = terminal.wait_for("was paid")
        assert "Latest news" in news and "$250.00" in news
        terminal.type("exit")
        terminal.process.wait(timeout=30)
    finally:
        terminal.close()
    assert "Traceback" not in "".join(terminal.seen)


def test_adk_run_answers_a_question_typed_at_its_prompt_with_the_news(tmp_path):
    """The README's way: wait at the HITL prompt, an approver decides elsewhere, ask "any news?" there."""
    project, home = fresh_project(tmp_path), tmp_path / "home"
    terminal = Terminal(project, home)
    try:
        lunch = terminal.ask(LUNCH)
        terminal.type("any news?")  # nobody has decided yet
        waiting = terminal.wait_for("[expense_agent]:")
        assert lunch in waiting and "waits for an approver" in waiting and "not accepted" not in waiting

        course = terminal.ask("Please reimburse $300 for a training course")
        approved = expenses(project, home, "approve", course, "--approver", "bob")
        assert approved.returncode == 0, approved.stderr
        terminal.type("any news?")  # the decision reached the conversation meanwhile
        news = terminal.wait_for("[expense_agent]:")
        assert course in news and "bob" in news and "$300.00" in news and "not accepted" not in news
        payout = re.search(r"\bP-[0-9a-f]{12}\b", news)
        assert payout, news
        terminal.type("exit")
        terminal.process.wait(timeout=30)
    finally:
        terminal.close()
    assert "Traceback" not in "".join(terminal.seen)
    shown = expenses(project, home, "show", course)
    assert f"Paid: {payout.group()} $300.00" in shown.stdout, shown.stdout


@pytest.mark.parametrize("command", ["approve", "reject"])
def test_main_py_decides_tickets_opened_by_main_py_request_in_a_fresh_clone(tmp_path, command):
    project, home = fresh_project(tmp_path), tmp_path / "home"
    requested = expenses(project, home, "request", LUNCH, "--user", "alice")
    assert requested.returncode == 0, requested.stderr
    ticket_id = ticket_in(requested.stdout)

    decided = expenses(project, home, command, ticket_id, "--approver", "bob", "--reason", "as agreed")

    assert decided.returncode == 0, decided.stderr
    assert (project / ".data" / "expenses.db").exists()  # the default ledger sits in the project
    assert not (ROOT / "long_running_agent" / ".data").exists()
    assert f"Payouts for {ticket_id}: {1 if command == 'approve' else 0}" in decided.stdout


async def test_ticket_from_plain_api_server_is_decided_in_the_inbox_api_of_make_web(tmp_path):
    project, home = fresh_project(tmp_path), tmp_path / "home"
    ledger_url = f"sqlite+aiosqlite:///{project / '.data' / 'expenses.db'}"
    with plain_adk("api_server", project, home) as adk, web_server(tmp_path, database_url=ledger_url) as web:
        session_id = new_session(adk, "alice")
        ticket_id = ticket_in(" ".join(json_texts(ask(adk, "alice", session_id, LUNCH))))

        async with httpx.AsyncClient(base_url=web.base_url, timeout=60) as client:
            approved = await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("bob"))

        assert approved.status_code == 200, approved.text
        assert "was paid" in approved.json()["agent_reply"]
        [paid] = payouts_in(events_of(adk, "alice", session_id))
        assert paid["status"] == "paid" and paid["ticket_id"] == ticket_id


BAD_SETTING = "APPROVAL_THRESHOLD=one hundred\n"
SAYS = "error: APPROVAL_THRESHOLD='one hundred' is not a number"


def with_dotenv(project: Path, home: Path) -> dict[str, str]:
    """A project whose `.env` holds a bad setting, and a user's environment that leaves `.env` to decide."""
    (project / ".env").write_text(BAD_SETTING)
    # The tests set every variable the app reads to "", which `.env` would not overwrite.
    return {name: value for name, value in plain_env(home).items() if name not in app_variables()}


def test_adk_run_with_a_bad_setting_stops_at_once_with_main_pys_one_line(tmp_path):
    project = fresh_project(tmp_path)
    env = with_dotenv(project, tmp_path / "home")
    ran = subprocess.run([str(ADK), "run", "long_running_agent"], cwd=project, env=env,
                         input="Please reimburse $250 for the team lunch\n", capture_output=True, text=True,
                         timeout=300)
    main_py = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "main.py"], cwd=project, env=env,
                             capture_output=True, text=True, timeout=300)

    assert ran.returncode == main_py.returncode == 1
    [line] = [line for line in ran.stderr.splitlines() if line.startswith("error:")]
    assert line.startswith(SAYS) and main_py.stderr.strip() == line
    assert "Traceback" not in ran.stdout + ran.stderr


# Your own code (a notebook, a script) building the app on settings of its own, beside a bad .env.
BUILDS_ITS_OWN = """
from long_running_agent.agent import build_agent, build_app
from long_running_agent.desk import Desk
from long_running_agent.settings import Settings, SettingsError, load_settings
desk = Desk(Settings(APPROVAL_THRESHOLD="100"))
print(build_agent(desk, desk.model.name).name, build_app(desk).name)
try:
    load_settings()
except SettingsError as refusal:
    print("refused:", refusal.message)
"""


def test_importing_the_agent_module_with_a_bad_setting_does_not_exit_and_the_setting_is_refused_when_read(tmp_path):
    project = fresh_project(tmp_path)
    built = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", BUILDS_ITS_OWN], cwd=project,
                           env=with_dotenv(project, tmp_path / "home"), capture_output=True, text=True, timeout=300)

    assert built.returncode == 0, built.stdout + built.stderr
    names, refused = built.stdout.splitlines()
    assert names == f"expense_agent {APP}" and refused.startswith(f"refused: {SAYS.removeprefix('error: ')}")


@pytest.mark.parametrize("command", ["web", "api_server"])
def test_plain_adk_servers_with_a_bad_setting_stop_at_the_agents_first_load_with_one_line(tmp_path, command):
    project = fresh_project(tmp_path)
    with plain_adk(command, project, tmp_path / "home", env=with_dotenv(project, tmp_path / "home")) as server:
        session = httpx.post(f"{server.base_url}/apps/{APP}/users/alice/sessions", json={}, timeout=60)
        assert session.status_code == 200  # ADK's own store: the agent is not loaded yet
        try:
            answer = httpx.post(f"{server.base_url}/run", timeout=60, json=run_body(
                "alice", session.json()["id"], user_text("Please reimburse $250 for the team lunch")))
        except httpx.TransportError:
            answer = None  # the server stopped while loading the agent: no plain-text 500
        assert answer is None, answer.text
        deadline = time.monotonic() + 30
        while SAYS not in server.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        log = server.log.read_text()
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{server.base_url}/list-apps", timeout=5)  # it stopped, as main.py does
    assert [line for line in log.splitlines() if line.startswith("error:")] == [
        next(line for line in log.splitlines() if line.startswith(SAYS))]
    assert "Traceback" not in log and "Could not record" not in log


def test_plain_adk_answers_a_refused_gemini_key_with_what_to_check_not_a_traceback_or_a_500(tmp_path):
    project, home = fresh_project(tmp_path), tmp_path / "home"
    with FakeGemini([BAD_KEY] * 2) as fake:
        env = plain_env(home, AGENT_MODEL="gemini-3.5-flash", GOOGLE_API_KEY="not-a-valid-key", GEMINI_API_KEY="",
                        GOOGLE_GENAI_USE_VERTEXAI="", GOOGLE_GENAI_USE_ENTERPRISE="", GOOGLE_GENAI_API_VERSION="",
                        GOOGLE_GEMINI_BASE_URL=fake.base_url)
        ran = subprocess.run([str(ADK), "run", "long_running_agent"], cwd=project, env=env, input=f"{LUNCH}\n",
                             capture_output=True, text=True, timeout=300)
        with plain_adk("api_server", project, home, env=env) as server:
            answer = httpx.post(f"{server.base_url}/run", timeout=60, json=run_body(
                "alice", new_session(server, "alice"), user_text(LUNCH)))
    assert fake.errors == [] and fake.unused == 0

    assert "Traceback" not in ran.stdout + ran.stderr, ran.stdout + ran.stderr
    # The agent's answer, after adk run's prompt (typed input echoes no newline).
    [said] = [line.split("[expense_agent]: ", 1)[1] for line in ran.stdout.splitlines()
              if "[expense_agent]: " in line and line.endswith(ModelUnavailable.NEXT["key"])]
    assert said.startswith("The model gemini-3.5-flash") and fake.base_url in said, said
    assert answer.status_code == 200, answer.text  # not ADK's plain-text 500
    assert json_texts(answer.json()) == [said]
