"""The docs show what the programs really print, and every picture they show exists.

Each console session in README.md and docs/*.md is run for real (support/
transcripts.py) and must print what the page shows; `UPDATE_DOCS=1` rewrites
the pages from a fresh run instead. The curl sessions need curl and jq.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.processes import ROOT, pending_ticket
from support.project import expenses, fresh_project, made_venv, plain_adk, plain_env, ticket_in
from support.releases import load_release_0_1
from support.servers import APP, LUNCH, web_server
from support.transcripts import Session, blocks, normalize, parse, run, update, updating

from long_running_agent.desk import Desk
from long_running_agent.settings import load_settings

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md"]
SESSIONS = {name: (page, steps) for page in PAGES if page.exists() for name, steps in blocks(page).items()}
HOME_SHOWN = "~/long-running-agent"
# The tokens the docs show (README, "Configuration"): choose your own.
DOC_APPROVERS = "bob:change-me-bob,carol:change-me-carol,alice:change-me-alice"


def check(name: str, session: Session) -> None:
    page, expected = SESSIONS[name]
    actual = run(expected, session)
    if updating():
        update(page, name, actual)
        return
    for want, got in zip(expected, actual, strict=True):
        assert normalize(got.output) == normalize(want.output), (
            f"{page.name}, session {name}, `$ {want.command}` printed:\n{got.output}\n\n"
            "Run UPDATE_DOCS=1 .venv/bin/python -m pytest tests/test_docs.py to refresh the page."
        )


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A fresh clone's folder (with the project's venv) and a HOME with no settings."""
    project = fresh_project(tmp_path)
    made_venv(project)
    yield project, tmp_path / "home"


def test_every_session_in_the_docs_is_checked():
    checked = {"adk-web-approve", "memory-store-approve", "ticket-history", "http-api", "http-api-errors",
               "step-5-by-hand", "step-5-dev-chat-approval", "two-approvers", "migrate", "slack-click",
               "slack-click-decided", "audit-tamper", "audit-reset", "a2a", "a2a-withdraw", "a2a-errors"}
    assert set(SESSIONS) == checked, "a session in the docs has no test, or a test lost its session"


def test_every_picture_the_docs_show_exists():
    for page in PAGES:
        for target in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", page.read_text()):
            assert (page.parent / target).is_file(), f"{page.name} shows {target}, which is missing"


@pytest.mark.subprocess
def test_readme_approval_of_a_plain_adk_web_ticket(project):
    folder, home = project
    with plain_adk("api_server", folder, home) as adk:
        ticket = _request(adk.base_url, "alice")
        check("adk-web-approve", Session(folder, plain_env(home), ticket, {str(folder): HOME_SHOWN}))


@pytest.mark.subprocess
def test_docs_approval_of_a_conversation_kept_in_another_process(project):
    folder, home = project
    with plain_adk("api_server", folder, home, "--session_service_uri", "memory://") as adk:
        ticket = _request(adk.base_url, "alice")
        check("memory-store-approve", Session(folder, plain_env(home), ticket, {str(folder): HOME_SHOWN}))


@pytest.mark.subprocess
def test_docs_ticket_history(project):
    folder, home = project
    ticket = pending_ticket(expenses(folder, home, "request", LUNCH, "--user", "alice"))
    check("ticket-history", Session(folder, plain_env(home), ticket, {str(folder): HOME_SHOWN}))


@pytest.mark.subprocess
def test_docs_migrate(project):
    folder, home = project
    url = f"sqlite+aiosqlite:///{folder.parent}/release-0.1.db"
    load_release_0_1(url)
    check("migrate", Session(folder, plain_env(home, EXPENSES_DATABASE_URL=url)))


def test_docs_model_choice(monkeypatch):
    """docs/gemini.md's first lines of `python main.py` under each setting: main.py's own Model line."""
    page = (ROOT / "docs" / "gemini.md").read_text()
    [block] = re.findall(r"```console\n(\$ \.venv/bin/python main\.py\n.*?)```", page, re.S)
    for step in parse(block):
        *assignments, _python, _main = step.command.split()
        with monkeypatch.context() as shell:
            for name, value in (a.split("=", 1) for a in assignments):
                shell.setenv(name, value)
            # What main.py prints first (its desk's model), without running the demo (which would call Gemini).
            line = f"Model:    {Desk(load_settings()).model}"
        assert line == step.output.strip(), step.command


@pytest.mark.subprocess
def test_docs_two_approvers(project):
    folder, home = project
    ticket = pending_ticket(expenses(folder, home, "request", "Please reimburse $6,000 for the conference sponsorship",
                                     "--user", "alice"))
    check("two-approvers", Session(folder, plain_env(home), ticket, {str(folder): HOME_SHOWN}))


@pytest.mark.subprocess
@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("jq")),
                    reason="the curl sessions need curl and jq: apt-get install -y curl jq")
def test_docs_http_api_walkthrough(tmp_path):
    with web_server(tmp_path, APPROVERS=DOC_APPROVERS) as server:
        # The walkthrough says where the server is itself: its `export ADK=` names the address shown.
        env = {k: v for k, v in os.environ.items() if k != "ADK"} | {"HOME": str(tmp_path / "home")}
        port = server.base_url.rsplit(":", 1)[1]
        shown = {f"127.0.0.1:{port}": "127.0.0.1:8000"}
        check("http-api", Session(tmp_path, env, None, shown))
        # Further down the page, in the reader's same shell, ADK is still set.
        check("http-api-errors", Session(tmp_path, env | {"ADK": server.base_url}, None, shown))
        check("step-5-by-hand", Session(tmp_path, env | {"ADK": server.base_url}, None, shown))


@pytest.mark.subprocess
@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("jq")),
                    reason="the curl sessions need curl and jq: apt-get install -y curl jq")
def test_docs_step_5_by_hand_pays_with_dev_chat_approval(tmp_path):
    """The seed's own FunctionResponse, sent with curl to `DEV_CHAT_APPROVAL=true make web`, pays."""
    with web_server(tmp_path, APPROVERS=DOC_APPROVERS, DEV_CHAT_APPROVAL="true") as server:
        env = {k: v for k, v in os.environ.items() if k != "ADK"} | {"HOME": str(tmp_path / "home"),
                                                                     "ADK": server.base_url}
        port = server.base_url.rsplit(":", 1)[1]
        check("step-5-dev-chat-approval", Session(tmp_path, env, None, {f"127.0.0.1:{port}": "127.0.0.1:8000"}))


@pytest.mark.subprocess
@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("jq")),
                    reason="the curl sessions need curl and jq: apt-get install -y curl jq")
def test_docs_slack_click_signed_locally_decides_a_ticket(tmp_path):
    """docs/slack.md's local settings start `make web`; its signed click approves a ticket, as bob through Slack."""
    settings = dict(line.split("=", 1) for line in _settings_block("slack.md", "slack, locally"))
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")  # the page runs .venv/bin/python from the project folder
    with web_server(tmp_path, **settings) as server:
        ticket = _request(server.base_url, "alice")
        env = {k: v for k, v in os.environ.items() if k != "ADK"} | {"HOME": str(tmp_path / "home")}
        port = server.base_url.rsplit(":", 1)[1]
        shown = {f"127.0.0.1:{port}": "127.0.0.1:8000"}
        check("slack-click", Session(tmp_path, env, ticket, shown))
        _wait_until_paid(server.base_url, ticket, token="change-me-bob")
        check("slack-click-decided", Session(tmp_path, env, ticket, shown))


@pytest.mark.subprocess
@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("jq")),
                    reason="the curl sessions need curl and jq: apt-get install -y curl jq")
def test_docs_a2a_walkthrough(tmp_path):
    """docs/a2a.md's curl sessions, against `make web` with the page's A2A_CLIENTS and the README's APPROVERS."""
    clients = re.search(r"echo 'A2A_CLIENTS=([^']+)' >> \.env", (ROOT / "docs" / "a2a.md").read_text())
    assert clients, "docs/a2a.md lost its A2A_CLIENTS line"
    with web_server(tmp_path, APPROVERS=DOC_APPROVERS, A2A_CLIENTS=clients.group(1)) as server:
        env = {k: v for k, v in os.environ.items() if k not in ("A2A", "TASK")} | {"HOME": str(tmp_path / "home")}
        port = server.base_url.rsplit(":", 1)[1]
        shown = {f"127.0.0.1:{port}": "127.0.0.1:8000"}
        check("a2a", Session(tmp_path, env, None, shown))
        # Further down the page, in the reader's same shell: A2A is still set, and TASK is the walkthrough's.
        env |= {"A2A": f"{server.base_url}/a2a/{APP}"}
        check("a2a-withdraw", Session(tmp_path, env, None, shown))
        check("a2a-errors", Session(tmp_path, env | {"TASK": _a2a_task(env["A2A"], "lunch-1")}, None, shown))


@pytest.mark.subprocess
def test_docs_audit_tamper_and_reset(project):
    folder, home = project
    ticket = pending_ticket(expenses(folder, home, "request", LUNCH, "--user", "alice"))
    approved = expenses(folder, home, "approve", ticket, "--approver", "bob")
    assert approved.returncode == 0, approved.stdout + approved.stderr
    session = Session(folder, plain_env(home), ticket, {str(folder): HOME_SHOWN})
    check("audit-tamper", session)
    check("audit-reset", session)


def test_every_link_between_the_pages_reaches_a_heading():
    """A link to another page's section (`security.md#identities`) names a heading that page has."""
    broken = []
    for page in PAGES:
        for target, anchor in re.findall(r"\]\(([\w./-]*\.md)?#([\w-]+)\)", page.read_text()):
            linked = (page.parent / target).resolve() if target else page
            if linked.exists() and anchor not in _anchors(linked):
                broken.append(f"{page.name}: {target}#{anchor}")
    assert broken == []


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)  # a `# comment` in a block is no heading
    headings = re.findall(r"^#{1,6} (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def _settings_block(page: str, name: str) -> list[str]:
    """The lines of the ```ini block a page marks `<!-- settings: NAME -->`."""
    found = re.search(rf"<!-- settings: {re.escape(name)} -->\n```ini\n(.*?)```", (ROOT / "docs" / page).read_text(),
                      re.S)
    assert found, f"docs/{page} lost its settings block {name!r}"
    return [line for line in found.group(1).splitlines() if line.strip()]


def _wait_until_paid(base_url: str, ticket: str, *, token: str, timeout: float = 60) -> None:
    """Slack's click is decided behind the answer: poll the ticket until its payout is there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = httpx.get(f"{base_url}/api/approvals/{ticket}", headers={"Authorization": f"Bearer {token}"},
                           timeout=30).json()
        if answer.get("payouts") and answer["ticket"].get("delivered_at"):
            return
        time.sleep(0.2)
    raise AssertionError(f"{ticket} was not paid within {timeout} s: {answer}")


def _a2a_task(url: str, message_id: str) -> str:
    """The id of travel-bot's task for `message_id`: sent again, a message answers with the task it opened."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": message_id, "role": "ROLE_USER", "parts": [{"text": LUNCH}]}}}
    headers = {"Authorization": "Bearer change-me-travel-bot", "A2A-Version": "1.0"}
    return str(httpx.post(url, json=body, headers=headers, timeout=60).json()["result"]["task"]["id"])


def _request(base_url: str, user: str) -> str:
    """Ask for $250 over ADK's API, as the dev UI does; returns the ticket id."""
    session = httpx.post(f"{base_url}/apps/{APP}/users/{user}/sessions", json={}, timeout=30).json()["id"]
    answer = httpx.post(f"{base_url}/run", timeout=60, json={
        "appName": APP, "userId": user, "sessionId": session,
        "newMessage": {"role": "user", "parts": [{"text": LUNCH}]},
    })
    texts = [p.get("text", "") for e in answer.json() for p in (e.get("content") or {}).get("parts", [])]
    return ticket_in(" ".join(texts))

