"""The one place the app is put together: settings, clock, ledger, session stores and runners.

The tools, the guard, the approver CLI, the web server, the tests and the
benchmarks all take what they need from `services()`, so switching the
database, the model or the clock is one call (`use_settings`, `use_clock`,
`use_app`), never an edit of `os.environ`.

This module sits below the agent: it never imports it. The entry points that
run the agent (main.py, `make web`) hand it the agent's app factory
(`use_app_factory(build_app)`); plain `adk web` loads the app itself, and what
runs inside it delivers with the app that is running (approval/courier.py).

Async database engines belong to the event loop that made them, so each loop
(a CLI command, a server, a test) gets its own `Services`, with one engine per
database for the ledger and ADK's session store alike; `close_services()`
disposes them at the end.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any, Protocol

from google.adk.apps import App
from google.adk.models import BaseLlm
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, DatabaseSessionService
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from .ledger import Ledger, utc_now
from .ledger.engine import create_engine
from .ledger.migrate import startup_lock
from .ledger.policy import Policy
from .model.choice import choose_model
from .settings import Settings, settings

Clock = Callable[[], datetime]


def session_service(url: str) -> DatabaseSessionService:
    """ADK's session store on an engine of its own for `url`, tuned as the ledger's (ledger/engine.py).

    A process shares one engine per database between the ledger and its
    session store (`Services`); an engine of its own is for something that
    stands in for another process (tests, benchmark replicas).
    """
    return DatabaseSessionService(db_engine=create_engine(url))


class AppFactory(Protocol):
    """What builds the app every surface runs (agent.py's `build_app`), on a given model."""

    def __call__(self, *, model: str | BaseLlm | None = None) -> App: ...


class Services:
    """What one event loop runs on, built from one `Settings`.

    One engine per database, shared by its ledger and ADK's session store:
    with SQLite's rollback journal (ledger/engine.py), two connections to one
    file in one process wait for each other in SQLite's busy handler whenever
    one reads while the other commits (1,000 concurrent flows took 425 s
    that way, 180 s on one engine: benchmarks/README.md).
    """

    def __init__(
        self, settings: Settings, clock: Clock, app: App | None = None, app_factory: AppFactory | None = None
    ) -> None:
        self.settings = settings
        self.clock = clock
        self._app = app
        self._app_factory = app_factory
        self._engines: dict[str, AsyncEngine] = {}
        self._ledger: Ledger | None = None
        self._sessions: BaseSessionService | None = None
        self._others: dict[str, BaseSessionService] = {}
        self._ledgers: dict[str, Ledger] = {}
        self._background: set[asyncio.Task[Any]] = set()

    def in_background(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run `work` beside the caller (e.g. a webhook after a tool); `close()` waits for it."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def wait_for_background(self) -> None:
        """Wait for the background work started so far."""
        await asyncio.gather(*self._background, return_exceptions=True)

    def engine_at(self, database_url: str) -> AsyncEngine:
        """The engine for `database_url`, made once, for its ledger and its session store alike."""
        if database_url not in self._engines:
            self._engines[database_url] = create_engine(database_url)
        return self._engines[database_url]

    @property
    def approvers(self) -> frozenset[str] | None:
        """Who may decide (APPROVERS, by name); None when APPROVERS is not set."""
        return frozenset(self.settings.approvers.values()) or None

    @property
    def ledger(self) -> Ledger:
        """The ledger in the app's own database."""
        if self._ledger is None:
            url = self.settings.database_url
            self._ledger = self._ledger_on(url, auto_migrate=self.settings.auto_migrate)
        return self._ledger

    def _ledger_on(self, url: str, *, auto_migrate: bool = True) -> Ledger:
        config = self.settings
        policy = Policy(
            approval_threshold=config.approval_threshold, max_amount=config.max_amount,
            daily_auto_approval_limit=config.daily_auto_approval_limit,
            dual_approval_above=config.dual_approval_above, approval_ttl=config.approval_ttl,
        )
        return Ledger(url, clock=self.clock, auto_migrate=auto_migrate, engine=self.engine_at(url),
                      outbox=config.webhook_url is not None, approvers=self.approvers, policy=policy)

    @property
    def app(self) -> App:
        """The agent app that runs here: the factory's, on the model the settings choose."""
        if self._app is None:
            if self._app_factory is None:
                raise RuntimeError("No agent app to run: the entry point hands it over with "
                                   "use_app_factory(build_app) (long_running_agent/agent.py).")
            self._app = self._app_factory(model=choose_model(self.settings.model).name)
        return self._app

    @property
    def sessions(self) -> BaseSessionService:
        """ADK's session store in the app's own database, on the ledger's engine."""
        if self._sessions is None:
            self._sessions = DatabaseSessionService(db_engine=self.engine_at(self.settings.database_url))
        return self._sessions

    def use_sessions(self, sessions: BaseSessionService) -> None:
        """Keep the app's conversations in `sessions` (a server shares the one ADK serves).

        A server makes that store, and its engine, before its event loop runs;
        on the app's database the ledger then shares its engine. So this comes
        before anything here opens the database.
        """
        if isinstance(sessions, DatabaseSessionService) and (
            sessions.db_engine.url == make_url(self.settings.database_url)
        ):
            url = self.settings.database_url
            if self._engines.setdefault(url, sessions.db_engine) is not sessions.db_engine:
                raise RuntimeError("use_sessions() comes before the app's database is used")
        self._sessions = sessions

    def sessions_at(self, database_url: str) -> BaseSessionService:
        """ADK's session store in another database (a ticket's conversation may live there)."""
        if database_url == self.settings.database_url:
            return self.sessions
        if database_url not in self._others:
            self._others[database_url] = DatabaseSessionService(db_engine=self.engine_at(database_url))
        return self._others[database_url]

    def ledger_at(self, database_url: str) -> Ledger:
        """The ledger of another database (tests looking into a server's database)."""
        if database_url == self.settings.database_url:
            return self.ledger
        if database_url not in self._ledgers:
            self._ledgers[database_url] = self._ledger_on(database_url)
        return self._ledgers[database_url]

    async def prepare(self) -> tuple[str | None, str]:
        """Ready the database before serving: the ledger's migrations and ADK's session tables.

        Under the database's start-up lock (ledger/migrate.py), so replicas that
        start together take turns instead of creating the same tables at once.
        """
        async with startup_lock(self.ledger.engine):
            moved = await self.ledger.prepare()
            sessions = self.sessions
            if isinstance(sessions, DatabaseSessionService):
                await sessions.prepare_tables()
        return moved

    def runner(self, sessions: BaseSessionService | None = None, app: App | None = None) -> Runner:
        """A runner of `app` (default: this app) on `sessions` (default: the app's store)."""
        return Runner(app=app or self.app, session_service=sessions or self.sessions)

    async def close(self) -> None:
        """Finish the background work, then dispose each engine once (ledgers and session stores share them)."""
        await self.wait_for_background()
        engines = {id(engine): engine for engine in self._engines.values()}
        # A session store handed over on another database brought its own engine.
        handed = getattr(self._sessions, "db_engine", None)
        if handed is not None:
            engines.setdefault(id(handed), handed)
        for engine in engines.values():
            await engine.dispose()


_clock: Clock = utc_now
_app: App | None = None
_app_factory: AppFactory | None = None
# Per loop, by the identities of (settings, clock, app, factory); each Services
# holds them, so an id cannot be reused while its entry exists.
_built: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[int, ...], Services]] = (
    weakref.WeakKeyDictionary()
)


def services() -> Services:
    """The running loop's services, for the current settings, clock and app."""
    built = _built.setdefault(asyncio.get_running_loop(), {})
    current = settings()
    key = (id(current), id(_clock), id(_app), id(_app_factory))
    if key not in built:
        built[key] = Services(current, _clock, _app, _app_factory)
    return built[key]


def use_app_factory(factory: AppFactory | None) -> None:
    """Build the app to run with `factory` (agent.py's `build_app`): what the entry points hand over."""
    global _app_factory
    _app_factory = factory


def use_clock(clock: Clock | None) -> None:
    """Date everything by `clock` from now on (tests); None is the real clock."""
    global _clock
    _clock = clock or utc_now


def use_app(app: App | None) -> None:
    """Run `app` (a test's model, a benchmark's meter) wherever the app runs; None is the shipped one."""
    global _app
    _app = app


async def close_services() -> None:
    """Dispose what the running loop built (end of a command, a server or a test)."""
    for built in _built.pop(asyncio.get_running_loop(), {}).values():
        await built.close()
