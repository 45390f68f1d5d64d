"""Where one flow's time goes: the session store, the ledger, and the rest; and the ledger's round trips.

For a few flows in a row on each configuration, the session service's
coroutine methods are wrapped with a timer (calls made from inside an
already-timed call are not counted twice), and the ledger's visits to its
database are timed from the pool's events. What is left of the flow's wall
time is ADK's runner, the plugins (the approval guard), the tools' own code
and the offline model. One flow at a time, so wall time is this flow's own.

A ledger round trip is one visit of the ledger to its database: a connection
checked out of the pool, the statements sent on it (one transaction, or one
read), and the connection checked back in; a visit is the ledger's when one of
its statements names a ledger table (ADK's session store visits the same
engine for its own tables), and its time runs from checkout to checkin.
tests/test_round_trips.py holds the flow to 6.
"""

from __future__ import annotations

import functools
import inspect
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from google.adk.sessions import BaseSessionService
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from long_running_agent.ledger.storage.schema import Base

from .flows import OURS, SEED, System, open_system
from .stores import Stores

LEDGER_TABLE = re.compile(r"\b(" + "|".join(sorted(Base.metadata.tables)) + r")\b")


class _Visits:
    """The ledger's visits to its database (round trips), the statements it sent on them, and their time."""

    def __init__(self) -> None:
        self.round_trips = 0
        self.statements = 0
        self.seconds = 0.0
        self._open: dict[int, tuple[float, list[str]]] = {}

    def checkout(self, dbapi_connection: Any, *_: Any) -> None:
        self._open[id(dbapi_connection)] = (time.perf_counter(), [])

    def checkin(self, dbapi_connection: Any, *_: Any) -> None:
        started, sent = self._open.pop(id(dbapi_connection), (time.perf_counter(), []))
        if any(LEDGER_TABLE.search(statement) for statement in sent):
            self.round_trips += 1
            self.statements += len(sent)
            self.seconds += time.perf_counter() - started

    def sent(self, connection: Any, _cursor: Any, statement: str, *_: Any) -> None:
        self._open.setdefault(id(connection.connection.dbapi_connection), (time.perf_counter(), []))[1].append(
            statement)


@contextmanager
def _counted(engine: AsyncEngine | None, visits: _Visits) -> Iterator[None]:
    if engine is None:
        yield
        return
    sync = engine.sync_engine
    listeners: list[tuple[Any, str, Callable[..., Any]]] = [
        (sync.pool, "checkout", visits.checkout), (sync.pool, "checkin", visits.checkin),
        (sync, "before_cursor_execute", visits.sent),
    ]
    for target, name, listener in listeners:
        event.listen(target, name, listener)
    try:
        yield
    finally:
        for target, name, listener in listeners:
            event.remove(target, name, listener)


class _Clock:
    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self._depth = 0

    def wrap(self, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            self._depth += 1
            started = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.seconds += time.perf_counter() - started
                    self.calls += 1

        return timed


@contextmanager
def _timed(cls: type, clock: _Clock) -> Iterator[None]:
    """Time every coroutine method of `cls`, inherited ones too."""
    own = dict(vars(cls))
    methods = {
        name: getattr(cls, name) for name in dir(cls)
        if not name.startswith("__") and inspect.iscoroutinefunction(getattr(cls, name))
    }
    for name, member in methods.items():
        setattr(cls, name, clock.wrap(member))
    try:
        yield
    finally:
        for name in methods:
            if name in own:
                setattr(cls, name, own[name])
            else:
                delattr(cls, name)


async def measure_breakdown(stores: Stores, *, flows: int, warmup_flows: int) -> list[dict[str, Any]]:
    rows = []
    for name in (OURS, SEED):
        for store in stores.kinds:
            system = open_system(name, store, await stores.fresh(store))
            try:
                rows.append(await _breakdown(system, flows, warmup_flows))
            finally:
                await system.close()
    return rows


async def _breakdown(system: System, flows: int, warmup_flows: int) -> dict[str, Any]:
    for n in range(warmup_flows):
        await system.flow(n)
    sessions, visits = _Clock(), _Visits()
    service_class = type(system.runner.session_service)
    assert issubclass(service_class, BaseSessionService)
    total = 0.0
    with _timed(service_class, sessions), _counted(system.ledger.engine if system.ledger else None, visits):
        for n in range(flows):
            _pending, took = await system.flow(1000 + n)
            total += took.total_s
    return {
        "system": system.name,
        "store": system.store,
        "flows": flows,
        "flow_s": total / flows,
        "session_store_s": sessions.seconds / flows,
        "session_store_calls": sessions.calls / flows,
        "ledger_s": visits.seconds / flows,
        "ledger_round_trips": visits.round_trips / flows,
        "ledger_statements": visits.statements / flows,
        "rest_s": (total - sessions.seconds - visits.seconds) / flows,
    }
