"""The fixtures every test module shares, defined once (a pytest plugin that tests/conftest.py loads).

A test that uses the app takes a desk made here (support/desks.py), with its
own SQLite file; `configure(...)` changes a setting of that desk and `clock`
moves its time without sleeping; a test that takes none of them builds no
desk. `db_url` runs a test twice, on a SQLite file and on a real PostgreSQL
server (one throwaway server per test process from support/postgres.py, a
new database per test). `server` is `make web` in a
subprocess, one per test module, and `client` talks to it over HTTP.
Subprocesses (the CLI, the servers) get their settings through their
environment, as users give them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest

from long_running_agent.settings import ModelSettings, load_settings

from .clock import FakeClock
from .desks import TestDesk
from .ledger_template import build as build_ledger_template
from .models import OFFLINE
from .postgres import new_postgres_database, postgres_server
from .servers import WebServer, web_server

# Read once the environment is cleared (tests/conftest.py does that before loading this plugin).
BASE = load_settings().model_copy(update={"model": ModelSettings(OFFLINE, None)})


@pytest.fixture(scope="session")
def ledger_template(tmp_path_factory) -> Path:
    """A SQLite file at this code's schema, built once per test process; each desk's own starts as a copy."""
    return build_ledger_template(tmp_path_factory.mktemp("ledger-template"), BASE)


@pytest.fixture
async def desk(tmp_path, ledger_template) -> AsyncIterator[TestDesk]:
    """A desk of the test's own on the offline model, the real clock and a SQLite file of its own."""
    own = TestDesk(BASE.model_copy(update={"database_url": f"sqlite+aiosqlite:///{tmp_path}/expenses.db"}),
                   template=ledger_template)
    yield own
    await own.close()
    for engine in own.opened:
        await engine.dispose()


@pytest.fixture
def configure(desk) -> Callable[..., TestDesk]:
    """Change the test desk's settings: configure(approval_threshold=Decimal("200"))."""
    return desk.configure


@pytest.fixture
def clock(desk) -> FakeClock:
    """Time that moves only when the test says so: clock.advance(hours=73)."""
    fake = FakeClock()
    desk.change(clock=fake)
    return fake


@pytest.fixture(scope="session")
def postgres_admin_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture
def postgres_url(postgres_admin_url) -> str:
    """A new, empty database on the session's PostgreSQL server."""
    return new_postgres_database(postgres_admin_url)


@pytest.fixture
def sqlite_url(tmp_path, desk) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path}/expenses.db"
    desk.configure(database_url=url)
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request, tmp_path, desk) -> str:
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path}/expenses.db"
    else:
        url = request.getfixturevalue("postgres_url")
    desk.configure(database_url=url)
    return url


@pytest.fixture(scope="module")
def server(request, tmp_path_factory) -> Iterator[WebServer]:
    """`make web` in a subprocess on 127.0.0.1, shared by the tests of one module.

    Its own SQLite file and HOME; a module that needs other settings passes
    them as environment variables: `@pytest.mark.parametrize("server",
    [{"PRODUCTION_MODE": "true"}], indirect=True)`.
    """
    extra: dict[str, str] = getattr(request, "param", {})
    with web_server(tmp_path_factory.mktemp(request.module.__name__), **extra) as running:
        yield running


@pytest.fixture
async def client(server) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
        yield http
