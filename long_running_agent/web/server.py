"""One server for every surface: ADK's own FastAPI server (what `adk web` serves), plus the approver inbox.

To it this adds the approvers' routes, the gate, JSON for every error, a /health that asks the database, and a
sweep. A decision made here reaches the conversation wherever it started: the dev UI, /run, another process.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import os
import socket
import sys
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, nullcontext
from pathlib import Path
from urllib.parse import urlparse

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from google.adk.agents import BaseAgent
from google.adk.apps import App
from google.adk.cli.fast_api import get_fast_api_app
from google.adk.cli.service_registry import get_service_registry
from google.adk.cli.utils.base_agent_loader import BaseAgentLoader
from uvicorn.config import LOGGING_CONFIG

from ..a2a import ExpenseTasks, a2a_routes
from ..adk_compat import no_trace_view
from ..agent import build_app
from ..delivery.conversations import GuardedSessionService
from ..delivery.courier import Courier
from ..delivery.sweep import deliver_due, remind_due
from ..desk import Desk, desk_or_exit
from ..ledger.storage.engine import create_engine, database_in_words
from ..names import APP_NAME
from ..notifications import send_due
from ..observability.http import RequestMetrics
from ..observability.logs import configure_logging, log_model_failures
from ..observability.metrics import Metrics
from ..observability.tracing import configure_tracing
from ..refusals.startup import SchemaError, SettingsError
from .api_errors import API
from .gate import Gate
from .json_errors import JsonErrors, install_json_errors
from .routes import approvals, inbox
from .scrape import scraped
from .security_headers import SecurityHeaders

logger = logging.getLogger(__name__)

# How often the outbox is read for webhooks to send (a cheap, indexed read).
SEND_INTERVAL = 2.0


async def sweep(server: FastAPI) -> None:
    desk: Desk = server.state.desk
    if server.state.slack is not None:  # decisions asked for from Slack that a server died before making
        await server.state.slack.decide_left_over()
    await deliver_due(desk, actor="expiry sweep")
    await remind_due(desk)


class OneApp(BaseAgentLoader):
    """ADK's loader for the one app this server serves: the one built on its desk, not agent.py's own."""

    def __init__(self, app: App) -> None:
        self.app = app

    def load_agent(self, agent_name: str) -> BaseAgent | App:
        if agent_name != self.app.name:
            raise ValueError(f"No app {agent_name!r} here; this server serves {self.app.name}.")
        return self.app

    def list_agents(self) -> list[str]:
        return [self.app.name]


async def every(interval: float, work: Callable[[], Awaitable[object]], what: str) -> None:
    """Run `work` every `interval` seconds until cancelled, a failure logged; safe on replicas (docs/deployment.md)."""
    while True:
        await asyncio.sleep(interval)
        try:
            await work()
        except Exception:
            logger.warning("The %s failed; it runs again in %s s", what, interval, exc_info=True)


def create_server(desk: Desk, *, host: str = "127.0.0.1", port: int = 8000) -> FastAPI:
    """The server: ADK's dev UI and API for the desk's app, plus the approver inbox and its API."""
    config = desk.settings
    # One tuned session service for ADK's routes and for delivering decisions, whose engine the ledger shares (desk.py).
    sessions = GuardedSessionService(create_engine(config.database_url), ledger=lambda: desk.ledger)
    # ADK looks the URL's scheme up in its service registry, the documented hook for custom ones, before its own.
    get_service_registry().register_session_service(urlparse(config.database_url).scheme, lambda uri, **_: sessions)

    @asynccontextmanager
    async def lifespan(served: FastAPI) -> AsyncIterator[None]:
        desk.use_sessions(sessions)  # first: the ledger takes its engine
        # Under the database's start-up lock, so replicas take turns (for `make web`, main() has done it already).
        await desk.prepare()
        interval = config.sweep_interval.total_seconds()
        background = [asyncio.create_task(every(interval, lambda: sweep(served), "expiry sweep"))]
        if config.a2a_clients:  # an A2A task that ended: its pushes into the outbox
            background.append(asyncio.create_task(every(SEND_INTERVAL, tasks.queue_pushes, "A2A push queue")))
        if config.webhook_url or config.a2a_clients:  # drains the outbox; a slow receiver holds a place, not this loop
            background.append(asyncio.create_task(every(
                min(SEND_INTERVAL, interval), lambda: send_due(desk.ledger, config, drain=True), "webhook sender")))
        yield
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await desk.close()

    # Without the dev UI nothing reads ADK's trace view, which would keep every span for the life of the process.
    with no_trace_view() if config.production else nullcontext():
        server = get_fast_api_app(
            agents_dir=str(Path(__file__).resolve().parents[2]),
            # The desk's app, and no other, whatever else (tests, benchmarks, docs) sits in the repo root.
            agent_loader=OneApp(desk.app),
            session_service_uri=config.database_url,
            artifact_service_uri="memory://",
            # PRODUCTION_MODE serves no dev UI (and gate.py closes ADK's /dev routes).
            web=not config.production,
            host=host,
            port=port,
            # ADK guards a loopback bind from DNS rebinding, and warns that its routes have no authentication on others.
            bind_host=host,
            lifespan=lifespan,
        )
    server.state.desk = desk  # what the routes' dependencies hand them (routes.py)
    server.state.courier = courier = Courier(desk)
    server.state.slack = None
    # Other agents, over A2A (docs/a2a.md): ahead of ADK's routes, as `adk api_server --a2a` would mount them.
    tasks = ExpenseTasks(desk, courier, sessions, config.a2a_push_hosts)
    server.router.routes[:0] = a2a_routes(desk, tasks, f"http://{shown(host)}:{port}")
    # This server's own registry: what its desk's steps and its requests did (observability/metrics.py).
    server.state.metrics = metrics = Metrics(desk.watch)
    replace_health(server)
    server.include_router(approvals)
    server.include_router(inbox)
    server.include_router(scraped)
    if config.slack:  # slack_sdk, an optional extra, is imported only then
        from ..slack.actions import SlackActions
        from ..slack.interactivity import slack_routes

        server.state.slack = SlackActions(desk, decide=courier.decide, send=send_due)
        server.include_router(slack_routes)
    install_json_errors(server)
    server.add_middleware(Gate, settings=config, apps=[APP_NAME])
    server.add_middleware(JsonErrors)  # even the gate answers JSON if it fails
    server.add_middleware(SecurityHeaders)
    server.add_middleware(RequestMetrics, metrics=metrics)  # outermost: it times all the rest
    return server


def shown(host: str) -> str:
    """How others reach a host this server binds: a wildcard bind through this machine's name, not "0.0.0.0"."""
    return socket.gethostname() if host in ("0.0.0.0", "::") else host


def replace_health(server: FastAPI) -> None:
    """ADK's /health always says ok; this one asks the database to write."""
    server.router.routes[:] = [r for r in server.router.routes if getattr(r, "path", None) != "/health"]

    @server.get("/health")
    async def health(request: Request) -> JSONResponse:
        ledger = request.app.state.desk.ledger
        # Reads alone would pass while every write fails (a full disk, an unwritable journal): a row is written too.
        for step, check in (("unreachable", ledger.database.ping), ("unwritable", ledger.database.try_write)):
            try:
                await asyncio.wait_for(check(), timeout=5)
            except Exception as error:
                logger.warning("/health: the database is %s: %s", step, error)
                return JSONResponse({"status": "unavailable", "database": f"{step}: {type(error).__name__}"},
                                    status_code=503)
        return JSONResponse({"status": "ok", "database": "ok"})


async def prepare_database(desk: Desk) -> None:
    """The schema before serving, not only in the lifespan: uvicorn reports a failed one as a traceback, not a line."""
    try:
        await desk.prepare()
    finally:
        await desk.close()


def port_in_use(host: str, port: int) -> bool:
    """Whether another server listens on host:port, found by binding it as asyncio's create_server (uvicorn) does.

    Other failures (a host not of this machine, a port below 1024) are left to uvicorn, which names them.
    """
    try:
        for family, kind, proto, _name, address in socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE):
            with socket.socket(family, kind, proto) as sock:
                # As asyncio does on POSIX: a port a stopped server left in TIME_WAIT can be served again at once.
                if os.name == "posix":
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
    except OSError as error:
        return error.errno == errno.EADDRINUSE
    return False


def main(argv: list[str] | None = None) -> int:
    # ADK flags its own in-memory credential service as experimental on every start; nothing here can act on it.
    warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]", category=UserWarning)

    parser = argparse.ArgumentParser(description="Serve the dev UI, ADK's API and the approver inbox.")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--verbose", action="store_true",
                        help="log ADK's tracebacks too, e.g. of a model that cannot be reached")
    args = parser.parse_args(argv)
    # A model that cannot be reached: one paragraph in the log (model/failure.py), tracebacks with --verbose.
    log_model_failures("tracebacks" if args.verbose else "once")

    desk = desk_or_exit(build_app)
    config = desk.settings
    json_logs = configure_logging(config.log_format)
    try:  # before ADK's app sets its own tracer provider, so that every span leaves through ours (tracing.py)
        configure_tracing(endpoint=config.otlp_endpoint, content=config.trace_content)
    except SettingsError as error:
        print(f"error: {error.message} {error.next_step}", file=sys.stderr)
        return 1
    # Checked before the banner: uvicorn finds out only after it, and says just "[Errno 98]".
    if port_in_use(args.host, args.port):
        host = "" if args.host == "127.0.0.1" else f"--host {args.host} "
        print(f"error: {args.host} port {args.port} is already in use (is another make web running?); serve on "
              f"another port with:\n  make web ARGS='{host}--port {args.port + 1}'", file=sys.stderr)
        return 1
    try:
        asyncio.run(prepare_database(desk))
    except SchemaError as error:
        print(f"error: {error.sentence(API)}", file=sys.stderr)
        return 1
    base = f"http://{shown(args.host)}:{args.port}"
    print(f"Model:     {desk.model}")
    print(f"Database:  {database_in_words(config.database_url)}")
    print(f"Policy:    {desk.policy.in_words()}")
    if not config.production:
        print(f"Dev UI:    {base}/dev-ui/?app={APP_NAME}")
    print(f"Inbox:     {base}/inbox")
    clients = ", ".join(sorted(set(config.a2a_clients.values())))
    print(f"A2A:       {base}/a2a/{APP_NAME} (clients {clients})" if clients else
          f"A2A:       {base}/a2a/{APP_NAME} - set A2A_CLIENTS=name:token,... so other agents can call it")
    if config.slack:
        mapped = ", ".join(sorted(set(config.slack_approvers.values())))
        print(f"Slack:     {base}/slack/actions (the Slack app's Interactivity Request URL; approvers {mapped})")
    names = sorted(config.approver_names)
    print(f"Approvers: {', '.join(names)}" if names else
          "Approvers: none - set APPROVERS=name:token,... in .env so someone can sign in to the inbox")
    # With JSON logs, uvicorn's loggers write through the root logger's handler, not its own text ones.
    uvicorn.run(create_server(desk, host=args.host, port=args.port), host=args.host, port=args.port,
                log_config=None if json_logs else LOGGING_CONFIG)
    return 0
