"""How Alembic reaches the ledger's database.

The app hands over an open connection (`config.attributes["connection"]`,
see ledger/migrate.py), so migrations run inside the app's own transaction
and start-up lock. From the `alembic` command line, the database is
EXPENSES_DATABASE_URL (or the default SQLite file).
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from long_running_agent.ledger.schema import Base

config = context.config


def run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True,
                      compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


async def from_the_command_line() -> None:
    from long_running_agent.ledger.engine import create_engine
    from long_running_agent.settings import load_settings

    engine = create_engine(load_settings().database_url)
    async with engine.begin() as connection:
        await connection.run_sync(run)
    await engine.dispose()


connection = config.attributes.get("connection")
if connection is not None:
    run(connection)
else:
    asyncio.run(from_the_command_line())
