"""Real servers for tests: `python -m long_running_agent.web` (make web) on 127.0.0.1.

Each server runs in a subprocess with its own SQLite file and HOME, the way a
user starts it; tests talk to it over HTTP as any client would.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from .processes import ROOT

APP = "long_running_agent"
TOKENS = {"alice": "alice-token", "bob": "bob-token", "carol": "carol-token"}
LUNCH = "Please reimburse $250 for the team lunch"


@dataclass
class WebServer:
    base_url: str
    database_url: str
    log: Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def web_server(
    directory: Path, *, database_url: str | None = None, name: str = "server", **settings: str
) -> Iterator[WebServer]:
    """Run `python -m long_running_agent.web` on a free loopback port until the block ends.

    `database_url` defaults to a SQLite file in `directory`; several servers
    given the same one are replicas. `settings` are extra environment variables.
    """
    home = directory / "home"
    (home / ".adk").mkdir(parents=True, exist_ok=True)
    # Answers the dev UI's telemetry question, so its consent dialog stays closed.
    (home / ".adk" / "config.json").write_text(json.dumps({"telemetry": False}))
    database_url = database_url or f"sqlite+aiosqlite:///{directory}/expenses.db"
    env = os.environ | {
        "HOME": str(home),
        "AGENT_MODEL": "offline-expense-model",
        "EXPENSES_DATABASE_URL": database_url,
        "APPROVERS": ",".join(f"{name}:{token}" for name, token in TOKENS.items()),
        "APPROVAL_THRESHOLD": "100",
        "DEV_CHAT_APPROVAL": "false",
        "GOOGLE_API_KEY": "",
        "GEMINI_API_KEY": "",
        "PYTHONUNBUFFERED": "1",
    } | settings
    log = directory / f"{name}.log"
    for _attempt in range(3):
        port = free_port()
        with log.open("w") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "long_running_agent.web", "--port", str(port)],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            )
        base_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(f"{base_url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        if process.poll() is None:
            break
        if "address already in use" not in log.read_text().lower():
            pytest.fail(f"the web server exited early:\n{log.read_text()[-3000:]}")
    else:
        pytest.fail(f"no free port for the web server:\n{log.read_text()[-3000:]}")
    try:
        yield WebServer(base_url, database_url, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


