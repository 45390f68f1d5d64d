"""The desk: the one object every part of the app is handed (settings, policy, clock, ledger, sessions, app).

Each entry point (agent.py for plain `adk` commands, main.py, the `expenses` CLI, `make web`) builds one
and hands it down; nothing looks it up. A desk reads the approval policy once, as it is built. Async database
engines belong to the event loop that uses them first, so a desk serves one loop at a time: `close()` disposes
them, and a later loop opens them again.
ADK is imported where a desk first needs it (its model, a session store, a runner): the approver commands that
only read the ledger start in a third of the time.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from .ledger import Ledger, utc_now
from .ledger.policy import file
from .ledger.policy.rules import Policy, Rules
from .ledger.storage.engine import create_engine
from .ledger.storage.migrate import startup_lock
from .observability.spans import Watch
from .refusals.startup import SettingsError
from .settings import Settings, load_settings

if TYPE_CHECKING:
    from google.adk.apps import App
    from google.adk.models import BaseLlm
    from google.adk.runners import Runner
    from google.adk.sessions import BaseSessionService, DatabaseSessionService

    from .model.choice import ModelChoice

Clock = Callable[[], datetime]


class AppFactory(Protocol):
    """What builds the app a desk runs (agent.py's `build_app`)."""

    def __call__(self, desk: Desk, *, model: str | BaseLlm | None = None) -> App: ...


def policy_of(settings: Settings) -> Policy:
    """The policy the settings name: APPROVAL_POLICY's file, or APPROVAL_THRESHOLD and DUAL_APPROVAL_ABOVE as two
    tiers; a file that cannot work is a SettingsError, one line naming the field."""
    members = {a.name: a.groups for a in settings.approvers.values()} or None
    try:
        rules = (file.load(settings.approval_policy, members) if settings.approval_policy is not None
                 else Rules.from_thresholds(settings.approval_threshold, settings.dual_approval_above, members))
    except ValueError as error:
        raise SettingsError(f"APPROVAL_POLICY: {error}") from None
    return Policy(rules, max_amount=settings.max_amount, approval_ttl=settings.approval_ttl,
                  daily_auto_approval_limit=settings.daily_auto_approval_limit)


class Desk:
    """Settings, policy, clock, ledger, session store and agent app: what every part of the app works with."""

    def __init__(self, settings: Settings, *, clock: Clock = utc_now, app: AppFactory | None = None) -> None:
        self.settings = settings
        self.policy = policy_of(settings)  # a SettingsError if APPROVAL_POLICY's file cannot work
        self.clock = clock
        self._app_factory = app
        self._app: App | None = None
        # One engine per database, for its ledger and ADK's session store alike: with SQLite's rollback
        # journal, two connections to one file in one process wait for each other (benchmarks/README.md).
        self._engines: dict[str, AsyncEngine] = {}
        self._ledgers: dict[str, Ledger] = {}
        self._sessions: dict[str, BaseSessionService] = {}
        self._background: set[asyncio.Task[Any]] = set()
        # Where every ledger of this desk runs its steps: a server's metrics listen to it (observability/).
        self.watch = Watch()

    @property
    def model(self) -> ModelChoice:
        from .model.choice import choose_model

        return choose_model(self.settings.model)

    @property
    def app(self) -> App:
        if self._app is None:
            if self._app_factory is None:
                raise RuntimeError("This desk runs no agent app: build it with Desk(settings, app=build_app) "
                                   "(long_running_agent/agent.py).")
            self._app = self._app_factory(self, model=self.model.name)
        return self._app

    def engine_at(self, database_url: str) -> AsyncEngine:
        if database_url not in self._engines:
            self._engines[database_url] = create_engine(database_url)
        return self._engines[database_url]

    @property
    def ledger(self) -> Ledger:
        return self.ledger_at(self.settings.database_url)

    def ledger_at(self, database_url: str) -> Ledger:
        """The ledger in `database_url`, under this desk's settings (another replica's database, in tests)."""
        if database_url not in self._ledgers:
            own = database_url == self.settings.database_url
            self._ledgers[database_url] = Ledger(
                database_url, clock=self.clock, auto_migrate=self.settings.auto_migrate or not own,
                engine=self.engine_at(database_url), outbox=self.settings.webhook_url is not None,
                policy=self.policy, watch=self.watch)
        return self._ledgers[database_url]

    @property
    def sessions(self) -> BaseSessionService:
        return self.sessions_at(self.settings.database_url)

    def sessions_at(self, database_url: str) -> BaseSessionService:
        """ADK's session store in `database_url` (a ticket's conversation may live in another database)."""
        if database_url not in self._sessions:
            from google.adk.sessions import DatabaseSessionService

            self._sessions[database_url] = DatabaseSessionService(db_engine=self.engine_at(database_url))
        return self._sessions[database_url]

    def use_sessions(self, sessions: DatabaseSessionService) -> None:
        """Keep conversations in the store a server hands ADK, sharing its engine; call it before the first use."""
        url = self.settings.database_url
        if sessions.db_engine.url == make_url(url):
            if self._engines.setdefault(url, sessions.db_engine) is not sessions.db_engine:
                raise RuntimeError("use_sessions() comes before the app's database is used")
        self._sessions[url] = sessions

    def runner(self, sessions: BaseSessionService | None = None, app: App | None = None) -> Runner:
        from google.adk.runners import Runner

        return Runner(app=app or self.app, session_service=sessions or self.sessions)

    def in_background(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run `work` beside the caller (a webhook after a tool, say); `close()` waits for it."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def wait_for_background(self) -> None:
        await asyncio.gather(*self._background, return_exceptions=True)

    async def prepare(self) -> tuple[str | None, str]:
        """Ready the ledger's migrations and ADK's session tables, under the start-up lock: replicas take turns."""
        async with startup_lock(self.ledger.engine):
            moved = await self.ledger.prepare()
            sessions = self.sessions
            from google.adk.sessions import DatabaseSessionService

            if isinstance(sessions, DatabaseSessionService):
                await sessions.prepare_tables()
        return moved

    async def close(self) -> None:
        """Finish the background work, then dispose each engine once; a later use opens them again."""
        await self.wait_for_background()
        engines = {id(engine): engine for engine in self._engines.values()}
        for sessions in self._sessions.values():
            handed = getattr(sessions, "db_engine", None)  # a store handed over brought its own engine
            if handed is not None:
                engines.setdefault(id(handed), handed)
        self._engines.clear()
        self._ledgers.clear()
        self._sessions.clear()
        for engine in engines.values():
            await engine.dispose()


def desk_or_exit(app: AppFactory | None = None, *, stop: bool = False) -> Desk:
    """A desk on the settings at a program's start: a setting or policy file it cannot use ends it in one line. agent.py
    `stop`s: plain `adk web` builds it inside a request, where a SystemExit would be a 500 with a traceback."""
    try:
        return Desk(load_settings(), app=app)
    except SettingsError as error:
        line = f"error: {error.message} {error.next_step}"
        if stop:
            print(line, file=sys.stderr, flush=True)
            os._exit(1)
        raise SystemExit(line) from None
