"""Databases as an earlier release left them, for upgrade tests and the migration docs.

`tests/fixtures/release_0_1.*.sql` are dumps of databases that release 0.1
(commit 2488170) made by itself: `python main.py` (a paid ticket) and
`python main.py request` (a pending one), on SQLite and on PostgreSQL.
A dump's times are moved to the clock the test runs on, so its pending
ticket is as fresh on any date as it was on the day it was dumped.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from datetime import UTC, datetime, timedelta

import asyncpg

from .processes import ROOT

FIXTURES = ROOT / "tests" / "fixtures"
# Every time a dump holds: SQL and ISO times ("2026-11-30 12:28:45.570201", "2026-12-03T12:28:45+00:00"), and the
# epoch seconds of ADK's events ("timestamp": 1796041725.58669).
_TIME = re.compile(r"\b(\d{4}-\d\d-\d\d)([ T])(\d\d:\d\d:\d\d)(\.\d+)?")
_EPOCH = re.compile(r'("timestamp": )(\d{10}(?:\.\d+)?)')


def load_release_0_1(url: str, now: datetime | None = None) -> None:
    """Fill the empty database at `url` with what release 0.1 left in it, its times moved to before `now`."""
    dialect = "sqlite" if url.startswith("sqlite") else "postgres"
    script = moved((FIXTURES / f"release_0_1.{dialect}.sql").read_text(), now or datetime.now(UTC))
    if dialect == "sqlite":
        with sqlite3.connect(url.split(":///", 1)[1]) as db:
            db.executescript(script)
        return

    async def load() -> None:
        connection = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            await connection.execute(script)
        finally:
            await connection.close()

    asyncio.run(load())


def moved(dump: str, now: datetime) -> str:
    """`dump` with every time moved by whole days (a UTC day stays one day) to the last day it fits before `now`.

    It was made within a minute of its last ADK event; its tickets' expiry times are days after that.
    """
    made = datetime.fromtimestamp(max(float(seconds) for _, seconds in _EPOCH.findall(dump)), UTC)
    shift = timedelta(days=(now - made - timedelta(minutes=1)).days)

    def time(found: re.Match[str]) -> str:
        day, sep, clock, fraction = found.groups()
        at = datetime.fromisoformat(f"{day} {clock}{fraction or ''}") + shift
        return at.strftime(f"%Y-%m-%d{sep}%H:%M:%S") + (f"{at:.%f}"[: len(fraction)] if fraction else "")

    def epoch(found: re.Match[str]) -> str:
        return found[1] + repr(float(found[2]) + shift.total_seconds())

    return _EPOCH.sub(epoch, _TIME.sub(time, dump))
