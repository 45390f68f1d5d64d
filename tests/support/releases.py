"""Databases as an earlier release left them, for upgrade tests and the migration docs.

`tests/fixtures/release_0_1.*.sql` are dumps of databases that release 0.1
(commit 2488170) made by itself: `python main.py` (a paid ticket) and
`python main.py request` (a pending one), on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import sqlite3

import asyncpg

from .processes import ROOT

FIXTURES = ROOT / "tests" / "fixtures"


def load_release_0_1(url: str) -> None:
    """Fill the empty database at `url` with what release 0.1 left in it."""
    if url.startswith("sqlite"):
        path = url.split(":///", 1)[1]
        with sqlite3.connect(path) as db:
            db.executescript((FIXTURES / "release_0_1.sqlite.sql").read_text())
        return

    async def load() -> None:
        connection = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            await connection.execute((FIXTURES / "release_0_1.postgres.sql").read_text())
        finally:
            await connection.close()

    asyncio.run(load())
