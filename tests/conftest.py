"""Shared test set-up: always the offline model, a fresh database per test.

`db_url` runs a test twice, on a SQLite file and on a real PostgreSQL server
(one throwaway server per test session, a new database per test).
"""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

# Saved for tests/integration, then removed so nothing here can reach Gemini.
ORIGINAL_GEMINI_KEY = os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY")
os.environ["AGENT_MODEL"] = "offline-expense-model"

import long_running_agent  # noqa: E402,F401  (loads .env; cleared below)
from long_running_agent.runtime import close_runtime  # noqa: E402

from .postgres_server import PostgresUnavailable, postgres_server  # noqa: E402

for _name in (
    "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE",
    "GOOGLE_CLOUD_PROJECT",
    "EXPENSES_DATABASE_URL", "APPROVAL_THRESHOLD", "MAX_REIMBURSEMENT", "APPROVAL_TTL_HOURS",
    "DEV_CHAT_APPROVAL", "APPROVERS",
):
    os.environ.pop(_name, None)


@pytest.fixture(scope="session")
def postgres_admin_url():
    server = postgres_server()
    try:
        url = server.__enter__()
    except PostgresUnavailable as error:
        pytest.skip(f"no local PostgreSQL server could be started: {error}")
    yield url
    server.__exit__(None, None, None)


def new_postgres_database(admin_url: str) -> str:
    import asyncpg

    name = f"t_{uuid.uuid4().hex[:12]}"
    dsn = admin_url.replace("postgresql+asyncpg://", "postgresql://")

    async def create() -> None:
        connection = await asyncpg.connect(dsn)
        try:
            await connection.execute(f'CREATE DATABASE "{name}"')
        finally:
            await connection.close()

    asyncio.run(create())
    return admin_url.rsplit("/", 1)[0] + f"/{name}"


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
