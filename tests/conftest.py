"""Shared test set-up: the offline model, a fresh database per test, settings handed over, never read.

Each test runs with settings made here (`use_settings`), on its own SQLite
file; `configure(...)` changes a setting for one test and `clock` moves time
without sleeping. `db_url` runs a test twice, on a SQLite file and on a real
PostgreSQL server (one throwaway server per test session from
tests/support/postgres.py, a new database per test). Subprocesses (the CLI,
the servers) get their settings through their environment, as users give them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

# Saved for tests/integration, then removed so nothing here, and no process a
# test starts, can reach Gemini or read a developer's settings.
ORIGINAL_GEMINI_KEY = os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY")

from support.clock import FakeClock  # noqa: E402
from support.models import OFFLINE, close_opened  # noqa: E402
from support.postgres import new_postgres_database, postgres_server  # noqa: E402

import long_running_agent  # noqa: E402,F401  (loads .env; cleared below)
from long_running_agent.agent import build_app  # noqa: E402
from long_running_agent.services import close_services, use_app, use_app_factory, use_clock  # noqa: E402
from long_running_agent.settings import ModelSettings, Settings, load_settings, settings, use_settings  # noqa: E402

for _name in (
    "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE",
    "GOOGLE_CLOUD_PROJECT", "AGENT_MODEL",
    "EXPENSES_DATABASE_URL", "APPROVAL_THRESHOLD", "MAX_REIMBURSEMENT", "APPROVAL_TTL_HOURS",
    "DEV_CHAT_APPROVAL", "APPROVERS", "DAILY_AUTO_APPROVAL_LIMIT", "EXPIRY_SWEEP_SECONDS",
    "TRUSTED_USER_HEADER", "PRODUCTION_MODE", "AUTO_MIGRATE", "DUAL_APPROVAL_ABOVE", "APPROVAL_WEBHOOK_URL",
    "APPROVAL_WEBHOOK_SECRET", "APPROVAL_WEBHOOK_TIMEOUT_SECONDS", "APPROVAL_REMIND_BEFORE_HOURS", "ESCALATE_TO",
):
    os.environ.pop(_name, None)

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
def sqlite_url(tmp_path, configure) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path}/expenses.db"
    configure(database_url=url)
    return url


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path, configure) -> str:
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path}/expenses.db"
    else:
        url = new_postgres_database(request.getfixturevalue("postgres_admin_url"))
    configure(database_url=url)
    return url
