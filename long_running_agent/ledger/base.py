"""What every part of the ledger stands on: an engine, a clock, and the tables made on first use."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from .engine import create_engine
from .records import utc_now
from .schema import Base, create_missing_indexes

if TYPE_CHECKING:
    from .locks import ConversationLocks


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class LedgerBase:
    """One database (a SQLite file or PostgreSQL) and the clock that dates everything in it."""

    def __init__(self, url: str, *, clock: Callable[[], datetime] = utc_now) -> None:
        self.url = url
        self.engine = create_engine(url)
        self._sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self._clock = clock
        self._schema_ready = False
        self._schema_lock = asyncio.Lock()
        self._locks: ConversationLocks | None = None

    def now(self) -> datetime:
        return self._clock()

    @property
    def locks(self) -> ConversationLocks:
        """Leases on conversations, in this same database (locks.py)."""
        from .locks import ConversationLocks

        if self._locks is None:
            self._locks = ConversationLocks(self)
        return self._locks

    async def db(self) -> AsyncSession:
        """A database session, after making sure the tables exist."""
        if not self._schema_ready:
            async with self._schema_lock:
                if not self._schema_ready:
                    async with self.engine.begin() as conn:
                        await conn.run_sync(Base.metadata.create_all)
                        await conn.run_sync(create_missing_indexes)
                    self._schema_ready = True
        return self._sessions()

    async def ping(self) -> None:
        """Reach the database (for /health): raises if it cannot be reached."""
        async with self.engine.connect() as connection:
            await connection.exec_driver_sql("SELECT 1")

    async def close(self) -> None:
        await self.engine.dispose()
