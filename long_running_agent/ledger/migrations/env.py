"""How Alembic reaches the ledger's database.

The app hands over an open connection (`config.attributes["connection"]`,
see ledger/storage/migrate.py), so migrations run inside the app's own
transaction and start-up lock. From the `alembic` command line, the database is
the one `-x url=...` names, or the project's SQLite file: the environment is the
app's settings' to read (settings.py), and this runs below them.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from long_running_agent.ledger.storage.schema import Base

config = context.config


def run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True,
                      compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


async def from_the_command_line() -> None:
    from long_running_agent.ledger.storage.engine import DEFAULT_DATABASE_URL, create_engine

    engine = create_engine(context.get_x_argument(as_dictionary=True).get("url") or DEFAULT_DATABASE_URL)
    async with engine.begin() as connection:
        await connection.run_sync(run)
    await engine.dispose()


connection = config.attributes.get("connection")
if connection is not None:
    run(connection)
else:
    asyncio.run(from_the_command_line())
