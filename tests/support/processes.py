"""Running main.py (the demo), `expenses` (the approver CLI) and the server, as users do: a separate process."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from . import warm

ROOT = Path(__file__).resolve().parents[2]  # the project folder
# The approver CLI, as pip installed it beside this Python (.venv/bin/expenses).
EXPENSES = str(Path(sys.executable).with_name("expenses"))


def program(*args: str) -> list[str]:
    """`expenses *args` for an approver command, `python main.py *args` for the demo."""
    return [EXPENSES, *args] if args and not args[0].startswith("-") else [sys.executable, "main.py", *args]


def run(*args: str, url: str, timeout: float = 120, env: dict[str, str] | None = None, fresh: bool = False
        ) -> subprocess.CompletedProcess[str]:
    """`expenses *args` (or the demo) on the database at `url`; `env` adds settings (e.g. a webhook).

    An approver command runs in a process forked from one with ADK imported (warm.py); `fresh`, or the demo,
    in a new interpreter, for a test of what the interpreter itself does at start.
    """
    env = os.environ | {"EXPENSES_DATABASE_URL": url, "AGENT_MODEL": "offline-expense-model"} | (env or {})
    command = program(*args)
    if command[0] == EXPENSES and not fresh:
        return warm.run("long_running_agent.cli", list(args), env=env, cwd=ROOT, timeout=timeout, argv0=EXPENSES)
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def serve(url: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m long_running_agent.web` (make web) on the database at `url`, for one that should not start."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = os.environ | {"EXPENSES_DATABASE_URL": url, "AGENT_MODEL": "offline-expense-model"}
    return subprocess.run([sys.executable, "-m", "long_running_agent.web", "--port", str(port)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def start(*args: str, url: str) -> subprocess.Popen[str]:
    env = os.environ | {"EXPENSES_DATABASE_URL": url, "AGENT_MODEL": "offline-expense-model"}
    return subprocess.Popen(program(*args), cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def request_ticket(url: str, text: str = "Please reimburse $250 for the team lunch") -> str:
    return pending_ticket(run("request", text, "--user", "alice", url=url))


def pending_ticket(result: subprocess.CompletedProcess[str]) -> str:
    """The id of the ticket `expenses request` said it left pending."""
    assert result.returncode == 0, result.stderr
    match = re.search(r"Ticket (T-[0-9a-f]+) is pending", result.stdout)
    assert match, result.stdout
    return match.group(1)
