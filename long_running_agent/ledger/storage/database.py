"""The handle every part of the ledger shares: one engine, one clock, and tables at this code's schema.

The parts open their transactions on this one handle, so a ticket's change and its notification commit together.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import date, datetime

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

from ...observability.spans import Watch
from ...refusals.startup import SchemaBehind
from ..records import utc_now
from .engine import create_engine
from .migrate import current, head, migrate
from .schema import DailyAutoApprovalRow


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class Database:
    """One database (a SQLite file or PostgreSQL) and the clock that dates everything in it."""

    def __init__(
        self, url: str, *, clock: Callable[[], datetime] = utc_now, auto_migrate: bool = True,
        engine: AsyncEngine | None = None, watch: Watch | None = None,
    ) -> None:
        """`engine`: one to share (desk.py gives ADK's session store the same); default, one of its own.

        `watch`: where the ledger's parts run their steps (observability/spans.py), the desk's.
        """
        self.watch = watch or Watch()
        self.auto_migrate = auto_migrate
        self._owns_engine = engine is None
        self.engine = engine or create_engine(url)
        self._sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self._clock = clock
        self._schema_ready = False
        self._schema_lock = asyncio.Lock()

    def now(self) -> datetime:
        return self._clock()

    @property
    def is_postgresql(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    async def session(self) -> AsyncSession:
        """A database session, once the tables are at this code's schema (migrate.py)."""
        await self._ready()
        return self._sessions()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """One transaction on one connection, for the Core statements built once (benchmarks/README.md)."""
        await self._ready()
        async with self.engine.begin() as connection:
            yield connection

    async def _ready(self) -> None:
        if not self._schema_ready:
            async with self._schema_lock:
                if not self._schema_ready:
                    await self.prepare()

    async def prepare(self) -> tuple[str | None, str]:
        """Bring the tables to this code's schema, or refuse (AUTO_MIGRATE=false); returns (from, to)."""
        found = await current(self.engine)
        if found != head() and not self.auto_migrate:
            raise SchemaBehind(found, head())
        moved = await migrate(self.engine) if found != head() else (found, found)
        self._schema_ready = True
        return moved

    async def ping(self) -> None:
        """Reach the database (for /health): raises if it cannot be reached."""
        async with self.engine.connect() as connection:
            await connection.exec_driver_sql("SELECT 1")

    async def try_write(self) -> None:
        """Write a row and roll it back (for /health, docs/deployment.md): raises if the database takes no writes.

        SQLite writes its journal at a transaction's first change, so one uncommitted row is enough to find out.
        """
        probe = insert(DailyAutoApprovalRow).values(requester="/health", day=date(2000, 1, 1), total_cents=0)
        async with self.engine.connect() as connection:
            await connection.execute(probe)
            await connection.rollback()

    async def close(self) -> None:
        """Dispose the engine if it is the ledger's own; a shared one is its owner's to dispose."""
        if self._owns_engine:
            await self.engine.dispose()
