"""What a test process keeps between tests, kept small, so that its garbage collections stay cheap.

A test process holds a few million objects once ADK, SQLAlchemy, FastAPI and the tests are loaded, and Python's full
collections walked them all again, some twenty times a process. Once collection is done they are
frozen out of every later collection (`gc.freeze`), and so are the modules a test imports later (ADK's evaluator
brings two thousand); what the tests make is still collected, less often than Python's default.

FastAPI caches, for 4,096 endpoints, whether each is a coroutine or a generator; the endpoints of a server are
closures holding its desk, engine and ADK's session store, so the cache kept the last sixty or so servers a process
built alive, a million objects the collector walked again and again. It is emptied after each test.
"""

from __future__ import annotations

import gc
import sys

import pytest
from fastapi.dependencies import models

_modules = 0


def _freeze() -> None:
    global _modules
    gc.collect()
    gc.freeze()
    _modules = len(sys.modules)


def pytest_collection_finish(session: pytest.Session) -> None:
    _freeze()
    # The youngest generation collected every 10,000 allocations, not every 700, and each older one after 20 of the
    # younger one's collections, not 10: the tests' objects mostly die young anyway, so the collector's share of the
    # CPU falls (docs/testing.md).
    gc.set_threshold(10_000, 20, 20)


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    forget_endpoints()
    if len(sys.modules) > _modules:  # a test imported more (ADK's evaluation brings two thousand modules): frozen too
        _freeze()


def forget_endpoints() -> None:
    """Empty FastAPI's caches of endpoints, which hold the servers the tests built (a FastAPI without them: nothing)."""
    for name in ("_is_gen_callable_cached", "_is_async_gen_callable_cached", "_is_coroutine_callable_cached"):
        cached = getattr(models, name, None)
        if cached is not None:
            cached.cache_clear()
