"""Where one flow's time goes: the session store, the ledger, and the rest.

For a few flows in a row on each configuration, the session service's and
the ledger's coroutine methods are wrapped with timers (calls made from inside
an already-timed call of the same part are not counted twice). What is left
of the flow's wall time is ADK's runner, the plugins, the tools' own code and
the offline model. One flow at a time, so wall time is this flow's own.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from google.adk.sessions import BaseSessionService

from long_running_agent.ledger.database import Database
from long_running_agent.ledger.deliveries import Deliveries
from long_running_agent.ledger.inbox import InboxQueries
from long_running_agent.ledger.outbox import Outbox
from long_running_agent.ledger.payouts import Payouts
from long_running_agent.ledger.tickets import Tickets

from .flows import OURS, SEED, System, open_system
from .stores import Stores

# The ledger's parts (ledger/ledger.py). Its conversation locks are timed through the
# database sessions they open, not while they wait for a conversation.
LEDGER_PARTS = (Database, Tickets, Payouts, Deliveries, Outbox, InboxQueries)


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
    sessions, ledger = _Clock(), _Clock()
    service_class = type(system.runner.session_service)
    assert issubclass(service_class, BaseSessionService)
    total = 0.0
    with _timed(service_class, sessions), ExitStack() as parts:
        for part in LEDGER_PARTS:  # one clock: a part's call from inside another's is counted once
            parts.enter_context(_timed(part, ledger))
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
        "ledger_s": ledger.seconds / flows,
        "ledger_calls": ledger.calls / flows,
        "rest_s": (total - sessions.seconds - ledger.seconds) / flows,
    }
