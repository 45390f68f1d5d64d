"""A SQLite database at this code's schema, built once per test process and copied for each test that opens one.

A new file costs a test its build (the ledger's tables in one step, then ADK's session tables); a copy of
this one costs a fraction of that and holds the same tables, triggers and stamped revision, since it is
built by the same code on the same release. Only a desk's own database is copied, and only where the
app would build a new one itself (AUTO_MIGRATE on, no file yet): a test of a missing, half-migrated or
refused database still meets it, and tests/test_migrations.py checks the one-step build itself.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from long_running_agent.desk import Desk
from long_running_agent.ledger.storage.engine import sqlite_file
from long_running_agent.settings import Settings


def build(directory: Path, settings: Settings) -> Path:
    """Build the template in `directory` (one for the whole test run): the ledger and ADK's session tables, at head."""
    path = directory / "expenses.db"
    desk = Desk(settings.model_copy(update={"database_url": f"sqlite+aiosqlite:///{path}", "auto_migrate": True}))

    async def prepare() -> None:
        try:
            await desk.prepare()
        finally:
            await desk.close()

    asyncio.run(prepare())
    path.with_name(path.name + ".lock").unlink(missing_ok=True)  # the start-up lock's file, not the database's
    return path


def copy_to(template: Path, database_url: str, settings: Settings) -> None:
    """Start the desk's own SQLite file (`settings`) from `template`, if it is `database_url` and still to be made."""
    path = sqlite_file(database_url)
    if path is not None and database_url == settings.database_url and settings.auto_migrate \
            and Path(path).parent.is_dir() and not Path(path).exists():
        shutil.copyfile(template, path)
