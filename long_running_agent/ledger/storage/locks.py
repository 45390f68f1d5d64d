"""One run at a time per conversation, across processes and replicas (docs/delivery.md).

ADK appends events with an optimistic check: two runs on one conversation at once make the later writer fail with
`StaleSessionError`. So every run first takes the conversation's lock, a lease renewed while the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from ..records import Conversation, _utc
from .database import Database
from .schema import ConversationLockRow, in_conversation

logger = logging.getLogger(__name__)

LEASE = timedelta(seconds=15)
DEFAULT_WAIT = timedelta(seconds=60)


def _namespace() -> str:
    # Process ids compare only inside one pid namespace on one boot: two containers may share a host name and a pid.
    try:
        boot = open("/proc/sys/kernel/random/boot_id").read().strip()[:8]
        pid_ns = os.stat("/proc/self/ns/pid").st_ino
        return f"{socket.gethostname()}/{boot}/{pid_ns}"
    except OSError:
        return f"{socket.gethostname()}/{uuid.uuid4().hex[:8]}"


NAMESPACE = _namespace()


def new_holder() -> str:
    return f"{NAMESPACE}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def holder_is_dead(holder: str) -> bool:
    """True when `holder` is a process of this machine that no longer runs."""
    namespace, _, rest = holder.partition(":")
    pid_text = rest.partition(":")[0]
    if namespace != NAMESPACE or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@dataclass(frozen=True)
class LockState:
    holder: str
    purpose: str
    acquired_at: datetime
    expires_at: datetime
    dead: bool


class ConversationBusy(Exception):
    """The conversation stayed locked by another live run for the whole wait."""

    def __init__(self, conversation: Conversation, state: LockState | None, waited: timedelta) -> None:
        self.conversation, self.state, self.waited = conversation, state, waited
        self.retry_after = LEASE
        doing = f" ({state.purpose})" if state else ""
        super().__init__(f"conversation {conversation.session_id} is busy{doing}; "
                         f"waited {waited.total_seconds():.0f} s")


# What a run reads in the transaction that takes a conversation, and what it records in the one that frees it.
Read = Callable[[AsyncConnection], Awaitable[Any]]
RecordDeliveries = Callable[[AsyncConnection, Sequence[str], str], Awaitable[list[str]]]


def _take_statement(upsert: Any) -> Any:
    """INSERT the lock, or take it over where its lease lapsed; RETURNING its holder (values bound at execution)."""
    statement = upsert(ConversationLockRow).values(
        app_name=bindparam("app_name"), user_id=bindparam("user_id"), session_id=bindparam("session_id"),
        holder=bindparam("holder"), purpose=bindparam("purpose"), acquired_at=bindparam("acquired_at"),
        expires_at=bindparam("expires_at"),
    )
    return statement.on_conflict_do_update(
        index_elements=[ConversationLockRow.app_name, ConversationLockRow.user_id, ConversationLockRow.session_id],
        set_={name: statement.excluded[name] for name in ("holder", "purpose", "acquired_at", "expires_at")},
        where=ConversationLockRow.expires_at <= bindparam("lapsed_by"),
    ).returning(ConversationLockRow.holder)


# By dialect: is it PostgreSQL?
_TAKE = {True: _take_statement(postgresql_insert), False: _take_statement(sqlite_insert)}
_FREE = delete(ConversationLockRow).where(
    ConversationLockRow.app_name == bindparam("app_name"), ConversationLockRow.user_id == bindparam("user_id"),
    ConversationLockRow.session_id == bindparam("session_id"), ConversationLockRow.holder == bindparam("holder"),
)


class HeldLock:
    """A lock this process holds; renewed in the background until released.

    `found` is what `acquire(read=...)` read. Tickets added to `deliveries` are marked delivered in the transaction
    that releases the lock; `delivered` then holds those that were.
    """

    def __init__(
        self, locks: ConversationLocks, conversation: Conversation, holder: str, *, found: Any = None,
        waited: bool = False,
    ) -> None:
        self.locks, self.conversation, self.holder = locks, conversation, holder
        self.found, self.waited = found, waited
        self.deliveries: list[str] = []
        self.delivered: list[str] = []
        self._owner = asyncio.current_task()
        self._released = False
        self._wake: asyncio.Event | None = None
        self._renewer: asyncio.Task[None] | None = None
        # Most runs end within a third of the lease: a short run costs a timer, not a task.
        self._timer = asyncio.get_running_loop().call_later(LEASE.total_seconds() / 3, self._start_renewing)

    def _start_renewing(self) -> None:
        if not self._released:
            self._wake = asyncio.Event()
            self._renewer = asyncio.create_task(self._renew())

    async def _renew(self) -> None:
        interval = LEASE.total_seconds() / 3
        assert self._wake is not None
        while not self._released:
            if self._owner is not None and self._owner.done():
                # The run was cancelled without releasing (a client that hung up): free the conversation now.
                await self.release()
                return
            try:
                if not await self.locks._renew(self.conversation, self.holder):
                    logger.warning("Lost the lock on conversation %s", self.conversation.session_id)
                    return
            except Exception:  # the database is unreachable: the lease will lapse
                logger.warning("Could not renew the lock on %s", self.conversation.session_id, exc_info=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=interval)

    async def release(self) -> None:
        """Free the conversation, recording `deliveries` in the same transaction (failing to record them raises)."""
        if self._released:
            return
        self._released = True
        self._timer.cancel()
        if self._wake is not None:
            self._wake.set()
        try:
            self.delivered = await self.locks._release(self.conversation, self.holder, self.deliveries)
        except Exception:
            if self.deliveries:
                raise
            logger.warning("Could not release the lock on %s; it lapses in %s s",
                           self.conversation.session_id, LEASE.total_seconds(), exc_info=True)


class ConversationLocks:
    """Leases on conversations, kept in the ledger's database."""

    def __init__(self, database: Database, record_deliveries: RecordDeliveries | None = None) -> None:
        """`record_deliveries`: marks tickets delivered inside a release's transaction (deliveries.py)."""
        self.database = database
        self.record_deliveries = record_deliveries

    async def acquire(
        self, conversation: Conversation, *, purpose: str, wait: timedelta = DEFAULT_WAIT, read: Read | None = None
    ) -> HeldLock:
        """Wait until `conversation` is free and take it; `read` runs in the taking transaction (the lock's `found`)."""
        holder = new_holder()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait.total_seconds()
        pause = 0.02
        waited = False
        while True:
            async with self.database.transaction() as db:
                if await self.take_in(db, conversation, holder, purpose):
                    found = await read(db) if read is not None else None
                    return HeldLock(self, conversation, holder, found=found, waited=waited)
            waited = True
            state = await self.state(conversation)
            now = self.database.now()
            if state is not None and state.dead and await self._change_lease(
                conversation, state.holder, holder=holder, purpose=purpose, acquired_at=now, expires_at=now + LEASE
            ):
                logger.info("Took over conversation %s from a stopped process", conversation.session_id)
                found = None
                if read is not None:
                    async with self.database.transaction() as db:
                        found = await read(db)
                return HeldLock(self, conversation, holder, found=found, waited=True)
            if loop.time() >= deadline:
                raise ConversationBusy(conversation, state, wait)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)

    @contextlib.asynccontextmanager
    async def hold(
        self, conversation: Conversation, *, purpose: str, wait: timedelta = DEFAULT_WAIT
    ) -> AsyncIterator[HeldLock]:
        held = await self.acquire(conversation, purpose=purpose, wait=wait)
        try:
            yield held
        finally:
            await held.release()

    async def state(self, conversation: Conversation) -> LockState | None:
        async with await self.database.session() as db:
            row = await db.scalar(select(ConversationLockRow).where(in_conversation(conversation, ConversationLockRow)))
        if row is None:
            return None
        return LockState(
            holder=row.holder, purpose=row.purpose,
            acquired_at=_utc(row.acquired_at), expires_at=_utc(row.expires_at),  # type: ignore[arg-type]
            dead=holder_is_dead(row.holder) or _utc(row.expires_at) <= self.database.now(),  # type: ignore[operator]
        )

    def held(self, conversation: Conversation, holder: str) -> HeldLock:
        """The lock `take_in` took for `holder`, once its transaction has committed."""
        return HeldLock(self, conversation, holder)

    async def take_in(self, db: Any, conversation: Conversation, holder: str, purpose: str) -> bool:
        """Take `conversation` for `holder` in `db`'s transaction if it is free or its lease has lapsed (`_TAKE`)."""
        now = self.database.now()
        taken = await db.execute(_TAKE[self.database.is_postgresql], {
            **asdict(conversation), "holder": holder, "purpose": purpose, "acquired_at": now,
            "expires_at": now + LEASE, "lapsed_by": now,
        })
        return bool(taken.scalar() == holder)

    async def _renew(self, conversation: Conversation, holder: str) -> bool:
        return await self._change_lease(conversation, holder, expires_at=self.database.now() + LEASE)

    async def _change_lease(self, conversation: Conversation, held_by: str, **changes: Any) -> bool:
        """Change the lease `held_by` has on `conversation`; False if it no longer has the lock."""
        async with self.database.transaction() as db:
            changed = await db.execute(
                update(ConversationLockRow)
                .where(in_conversation(conversation, ConversationLockRow), ConversationLockRow.holder == held_by)
                .values(**changes)
            )
        return changed.rowcount == 1

    async def _release(self, conversation: Conversation, holder: str, deliveries: Sequence[str] = ()) -> list[str]:
        delivered: list[str] = []
        async with self.database.transaction() as db:
            if deliveries and self.record_deliveries is not None:
                # The guard's runs deliver decisions: the trail names it.
                delivered = await self.record_deliveries(db, deliveries, "approval_guard")
            await db.execute(_FREE, {**asdict(conversation), "holder": holder})
        return delivered
