"""The fixtures every test module shares, defined once (a pytest plugin that tests/conftest.py loads).

Each test runs with settings made here (`use_settings`), on its own SQLite
file; `configure(...)` changes a setting for one test and `clock` moves time
without sleeping. `db_url` runs a test twice, on a SQLite file and on a real
PostgreSQL server (one throwaway server per test process from
support/postgres.py, a new database per test). `server` is `make web` in a
subprocess, one per test module, and `client` talks to it over HTTP.
Subprocesses (the CLI, the servers) get their settings through their
environment, as users give them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from long_running_agent.agent import build_app
from long_running_agent.services import close_services, use_app, use_app_factory, use_clock
from long_running_agent.settings import ModelSettings, Settings, load_settings, settings, use_settings

from .clock import FakeClock
from .models import OFFLINE, close_opened
from .postgres import new_postgres_database, postgres_server
from .servers import WebServer, web_server

# Read once the environment is cleared (tests/conftest.py does that before loading this plugin).
BASE = load_settings().model_copy(update={"model": ModelSettings(OFFLINE, None)})
# What main.py and `make web` hand the wiring: the shipped agent's app.
use_app_factory(build_app)


@pytest.fixture(autouse=True)
async def app_settings(tmp_path) -> Any:
    """Every test: the offline model, the real clock, a SQLite file of its own."""
    use_settings(BASE.model_copy(update={"database_url": f"sqlite+aiosqlite:///{tmp_path}/expenses.db"}))
    use_clock(None)
    use_app(None)
    yield
    await close_services()
    await close_opened()
    use_settings(None)
    use_clock(None)
    use_app(None)


@pytest.fixture
def configure() -> Callable[..., None]:
    """Change settings for this test: configure(approval_threshold=Decimal("200"))."""
    def change(**fields: Any) -> None:
        unknown = set(fields) - set(Settings.model_fields)
        assert not unknown, f"no such setting: {unknown}"  # model_copy would add them silently
        use_settings(settings().model_copy(update=fields))
    return change


@pytest.fixture
def clock() -> FakeClock:
    """Time that moves only when the test says so: clock.advance(hours=73)."""
    fake = FakeClock()
    use_clock(fake)
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
def sqlite_url(tmp_path, configure) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path}/expenses.db"
    configure(database_url=url)
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request, tmp_path, configure) -> str:
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path}/expenses.db"
    else:
        url = request.getfixturevalue("postgres_url")
    configure(database_url=url)
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
