"""Shared test set-up: always the offline model, a fresh database per test.

`db_url` runs a test twice, on a SQLite file and on a real PostgreSQL server
(one throwaway server per test session from tests/support/postgres.py, a new
database per test).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# Saved for tests/integration, then removed so nothing here can reach Gemini.
ORIGINAL_GEMINI_KEY = os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY")
os.environ["AGENT_MODEL"] = "offline-expense-model"

from support.postgres import new_postgres_database, postgres_server  # noqa: E402

import long_running_agent  # noqa: E402,F401  (loads .env; cleared below)
from long_running_agent.runtime import close_runtime  # noqa: E402

for _name in (
    "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE",
    "GOOGLE_CLOUD_PROJECT",
    "EXPENSES_DATABASE_URL", "APPROVAL_THRESHOLD", "MAX_REIMBURSEMENT", "APPROVAL_TTL_HOURS",
    "DEV_CHAT_APPROVAL", "APPROVERS", "DAILY_AUTO_APPROVAL_LIMIT",
):
    os.environ.pop(_name, None)


@pytest.fixture(scope="session")
def postgres_admin_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path, monkeypatch) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path}/expenses.db"
    monkeypatch.setenv("EXPENSES_DATABASE_URL", url)
    return url


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path, monkeypatch) -> str:
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path}/expenses.db"
    else:
        url = new_postgres_database(request.getfixturevalue("postgres_admin_url"))
    monkeypatch.setenv("EXPENSES_DATABASE_URL", url)
    return url


@pytest.fixture(autouse=True)
async def _dispose_ledgers():
    yield
    await close_runtime()
