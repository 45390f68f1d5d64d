"""Real servers for tests: `python -m long_running_agent.web` (make web) on 127.0.0.1, or its server in-process.

Each server runs in a subprocess with its own SQLite file and HOME, the way a
user starts it; tests talk to it over HTTP as any client would.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry import trace

from long_running_agent.desk import Desk

from . import warm
from .processes import ROOT

APP = "long_running_agent"
TOKENS = {"alice": "alice-token", "bob": "bob-token", "carol": "carol-token"}
LUNCH = "Please reimburse $250 for the team lunch"


@dataclass
class WebServer:
    base_url: str
    database_url: str
    log: Path
    process: warm.Process | None = None  # for a test that kills it


async def payouts(desk: Desk, server: WebServer, ticket_id: str) -> list[Any]:
    """The payouts of `ticket_id` in `server`'s database, read through `desk`."""
    return await desk.ledger_at(server.database_url).payouts.find(ticket_id=ticket_id)


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
    with web_servers(directory, 1, database_url=database_url, name=name, **settings) as [server]:
        yield server


@contextmanager
def web_servers(
    directory: Path, count: int, *, database_url: str | None = None, name: str = "replica", **settings: str
) -> Iterator[list[WebServer]]:
    """Start `count` servers on one database at the same moment; the block runs once all serve."""
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
    logs = [directory / (f"{name}.log" if count == 1 else f"{name}-{i}.log") for i in range(count)]
    running: list[tuple[warm.Process, str]] = []
    try:
        launched = [_launch(env, log) for log in logs]  # all at once, before any is waited for
        for log, (process, base_url) in zip(logs, launched, strict=True):
            for _attempt in range(3):
                running.append((process, base_url))
                if _serves(process, base_url, log):
                    break
                running.pop()
                process, base_url = _launch(env, log)  # its port was taken meanwhile: another one
            else:
                pytest.fail(f"no free port for the web server:\n{log.read_text()[-3000:]}")
        yield [WebServer(base_url, database_url, log, process)
               for (process, base_url), log in zip(running, logs, strict=True)]
    finally:
        for process, _base_url in running:
            process.terminate()
        for process, _base_url in running:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _launch(env: dict[str, str], log: Path) -> tuple[warm.Process, str]:
    """`python -m long_running_agent.web --port N`, in a process forked from one with ADK imported (warm.py)."""
    port = free_port()
    log.write_text("")
    return warm.start("long_running_agent.web", ["--port", str(port)], env=env, cwd=ROOT, out=log), \
        f"http://127.0.0.1:{port}"


def answers(process: subprocess.Popen[bytes] | warm.Process, url: str, timeout: float = 60) -> bool:
    """Ask `url` every 0.1 s until it answers 200 (True), or `process` ends or `timeout` passes (False).

    One client for all the asking: each new one reads the whole CA bundle, which ten times a second while a server
    starts was most of the test's own CPU.
    """
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=1) as client:
        while process.poll() is None and time.monotonic() < deadline:
            try:
                if client.get(url).status_code == 200:
                    return True
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    return False


def _serves(process: warm.Process, base_url: str, log: Path) -> bool:
    """Wait until the server answers /health; False if its port was taken, a failed test otherwise."""
    if answers(process, f"{base_url}/health"):
        return True
    if process.poll() is None:
        pytest.fail(f"the web server did not answer /health within 60 s:\n{log.read_text()[-3000:]}")
    if "already in use" in log.read_text().lower():
        return False
    pytest.fail(f"the web server exited early:\n{log.read_text()[-3000:]}")


@asynccontextmanager
async def in_process(desk: Desk) -> AsyncIterator[httpx.AsyncClient]:
    """`make web`'s server (`create_server`) served in this process, on `desk`.

    Fast (no process to start), and the test can reach into its files; the
    requests come from 127.0.0.1, as through an SSH tunnel or a proxy on the
    same machine. Checks that need a real socket use `web_server`.
    """
    from long_running_agent.web import create_server

    before = span_processors()
    server = create_server(desk)
    adks = [p for p in span_processors() if p not in before]
    try:
        async with server.router.lifespan_context(server):
            transport = httpx.ASGITransport(app=server)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=60) as client:
                yield client
    finally:
        take_off(adks)


# ADK's get_fast_api_app adds two span processors for the dev UI's trace view, which see every span as it ends. A
# process serves one server; a test process builds dozens, and each span would go through all of theirs: each
# in-process server's are taken off when it stops.
def span_processors() -> list[Any]:
    """The span processors on the process's tracer provider, in order."""
    return list(getattr(getattr(trace.get_tracer_provider(), "_active_span_processor", None), "_span_processors", ()))


def take_off(processors: list[Any]) -> None:
    multi = getattr(trace.get_tracer_provider(), "_active_span_processor", None)
    if processors and multi is not None:
        multi._span_processors = tuple(p for p in multi._span_processors if p not in processors)
