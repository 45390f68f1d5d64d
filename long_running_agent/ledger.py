"""The approval ledger: the only authority on whether money may be paid out.

Tickets move pending -> approved | rejected | expired | cancelled and nowhere
else; every move is a conditional UPDATE (`WHERE status = 'pending'`), so two
approvers racing in two processes cannot both win. A payout row is unique per
ticket, so the database itself - not a scan of session events - guarantees a
ticket is paid at most once. Every transition is written to an audit trail.

Payouts within the approval threshold are capped per requester and UTC day,
again by the database: a per-requester-per-day counter row is raised only by
a conditional upsert (`... WHERE total + amount <= limit`), and a payout made
without approval is UNIQUE per requester, day and purpose. What the rules
refuse goes to an approver (`NeedsApproval`).

Works on a SQLite file (default) and PostgreSQL through one SQLAlchemy URL.
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
    event,
    func,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.schema import CreateIndex

from . import inputs
from .policy import from_cents

if TYPE_CHECKING:
    from .locks import Conversation, ConversationLocks

PENDING, APPROVED, REJECTED, EXPIRED, CANCELLED = (
    "pending", "approved", "rejected", "expired", "cancelled",
)
DECIDED = (APPROVED, REJECTED, EXPIRED, CANCELLED)


def utc_now() -> datetime:
    return datetime.now(UTC)


def _utc(value: datetime | None) -> datetime | None:
    # SQLite hands back naive datetimes; everything stored here is UTC.
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


class Base(DeclarativeBase):
    pass


# Decided (every move out of pending sets decided_at) but not yet delivered.
# Written without constants so that SQLite, which matches a partial index's
# WHERE term by term, can use the index for queries that state the same terms.
_UNDELIVERED_SQL = text("delivered_at IS NULL AND settled_at IS NULL AND decided_at IS NOT NULL")


class TicketRow(Base):
    __tablename__ = "approval_tickets"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    app_name: Mapped[str] = mapped_column(String(128))
    user_id: Mapped[str] = mapped_column(String(128))
    session_id: Mapped[str] = mapped_column(String(128), index=True)
    call_id: Mapped[str] = mapped_column(String(128))
    call_name: Mapped[str] = mapped_column(String(128))
    purpose: Mapped[str] = mapped_column(String(300))
    amount_cents: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    decided_by: Mapped[str | None] = mapped_column(String(128))
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    reason: Mapped[str | None] = mapped_column(String(500))
    # Where the conversation lives (see conversations.py), so a decision made
    # in any process reaches it.
    session_store: Mapped[str] = mapped_column(String(1000), default="app")
    # A decision reaches the conversation once: `delivered_at` is set by the
    # run that delivered it, under the conversation's lock (locks.py). The
    # last failed attempt, if any, says why it has not arrived yet.
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    delivery_error: Mapped[str | None] = mapped_column(String(500))
    # A decision whose conversation is gone is settled by an approver instead:
    # an approved one is paid without the agent, any other is closed.
    settled_by: Mapped[str | None] = mapped_column(String(128))
    settled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    # Call ids are unique within a conversation only: Gemini may supply its own.
    # The indexes serve the inbox: each list is read in index order (`id` breaks
    # ties, so pages never overlap) and each total is counted from the index alone.
    __table_args__ = (
        Index("ix_approval_tickets_status_created_id", "status", "created_at", "id"),
        Index("ix_approval_tickets_decided", "decided_at", "id"),
        # Each inbox load and server sweep first expires the overdue tickets: a range, not a scan.
        Index("ix_approval_tickets_status_expires", "status", "expires_at"),
        # Only undelivered, unsettled decisions, so it stays small. delivered_at
        # and settled_at (always NULL here) are columns too: SQLite counts from
        # an index only if it holds every column the query names.
        Index("ix_approval_tickets_undelivered", "decided_at", "id", "delivered_at", "settled_at",
              sqlite_where=_UNDELIVERED_SQL, postgresql_where=_UNDELIVERED_SQL),
        UniqueConstraint("app_name", "user_id", "session_id", "call_id"),
    )


class PayoutRow(Base):
    __tablename__ = "approval_payouts"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    # UNIQUE: at most one payout per ticket, enforced by the database.
    ticket_id: Mapped[str | None] = mapped_column(
        ForeignKey("approval_tickets.id"), unique=True
    )
    app_name: Mapped[str] = mapped_column(String(128))
    call_id: Mapped[str] = mapped_column(String(128))
    user_id: Mapped[str] = mapped_column(String(128))
    session_id: Mapped[str] = mapped_column(String(128), index=True)
    purpose: Mapped[str] = mapped_column(String(300))
    amount_cents: Mapped[int] = mapped_column(Integer)
    paid_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    # One payout per tool call in a conversation: a re-run of the same call reports it.
    __table_args__ = (UniqueConstraint("app_name", "user_id", "session_id", "call_id"),)


class DailyAutoApprovalRow(Base):
    """What one requester was paid without approval on one UTC day: the daily cap's counter."""

    __tablename__ = "daily_auto_approvals"
    requester: Mapped[str] = mapped_column(String(128), primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    total_cents: Mapped[int] = mapped_column(Integer)


class AutoApprovedPayoutRow(Base):
    """A payout made without approval, with what the same-purpose rule compares."""

    __tablename__ = "auto_approved_payouts"
    payout_id: Mapped[str] = mapped_column(ForeignKey("approval_payouts.id"), primary_key=True)
    requester: Mapped[str] = mapped_column(String(128))
    day: Mapped[date] = mapped_column(Date)
    purpose_key: Mapped[str] = mapped_column(String(300))

    # UNIQUE: one payout without approval per requester, UTC day and purpose.
    __table_args__ = (UniqueConstraint("requester", "day", "purpose_key"),)


class AuditRow(Base):
    __tablename__ = "approval_audit"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    ticket_id: Mapped[str] = mapped_column(String(40), index=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    actor: Mapped[str] = mapped_column(String(128))
    action: Mapped[str] = mapped_column(String(32))
    detail: Mapped[str | None] = mapped_column(String(500))


@dataclass(frozen=True)
class Ticket:
    id: str
    app_name: str
    user_id: str
    session_id: str
    call_id: str
    call_name: str
    purpose: str
    amount_cents: int
    status: str
    created_at: datetime
    expires_at: datetime
    decided_by: str | None
    decided_at: datetime | None
    reason: str | None
    session_store: str
    delivered_at: datetime | None
    delivery_error: str | None
    settled_by: str | None
    settled_at: datetime | None

    @classmethod
    def of(cls, row: TicketRow) -> Ticket:
        return cls(
            **{name: getattr(row, name) for name in cls.__dataclass_fields__}
            | {
                "created_at": _utc(row.created_at),
                "expires_at": _utc(row.expires_at),
                "decided_at": _utc(row.decided_at),
                "delivered_at": _utc(row.delivered_at),
                "settled_at": _utc(row.settled_at),
            }
        )

    @property
    def amount(self) -> float:
        return float(from_cents(self.amount_cents))

    def as_response(self) -> dict[str, Any]:
        """The ticket as the approval tool's response, as the model sees it."""
        response: dict[str, Any] = {
            "status": self.status,
            "ticket_id": self.id,
            "purpose": self.purpose,
            "amount": self.amount,
            "requested_by": self.user_id,
            "created_at": self.created_at.isoformat(timespec="seconds"),
            "expires_at": self.expires_at.isoformat(timespec="seconds"),
        }
        if self.status != PENDING:
            response |= {
                "decided_by": self.decided_by,
                "decided_at": self.decided_at.isoformat(timespec="seconds")
                if self.decided_at
                else None,
                "reason": self.reason,
            }
        return response


@dataclass(frozen=True)
class Payout:
    id: str
    ticket_id: str | None
    app_name: str
    call_id: str
    user_id: str
    session_id: str
    purpose: str
    amount_cents: int
    paid_at: datetime

    @classmethod
    def of(cls, row: PayoutRow) -> Payout:
        return cls(
            **{name: getattr(row, name) for name in cls.__dataclass_fields__}
            | {"paid_at": _utc(row.paid_at)}
        )

    @property
    def amount_text(self) -> str:
        return f"${from_cents(self.amount_cents):,}"

    def as_response(self, *, already_paid: bool = False) -> dict[str, Any]:
        return {
            "status": "already_paid" if already_paid else "paid",
            "payout_id": self.id,
            "ticket_id": self.ticket_id,
            "purpose": self.purpose,
            "amount": float(from_cents(self.amount_cents)),
            "paid_at": self.paid_at.isoformat(timespec="seconds"),
        }


@dataclass(frozen=True)
class AuditEntry:
    at: datetime
    actor: str
    action: str
    detail: str | None


class LedgerError(Exception):
    """A ledger operation refused; `http_status` maps it onto an API answer."""

    http_status = 400


class TicketNotFound(LedgerError):
    http_status = 404


class AlreadyDecided(LedgerError):
    http_status = 409


class TicketExpired(LedgerError):
    http_status = 409


class NotAllowed(LedgerError):
    http_status = 403


class NotApproved(LedgerError):
    http_status = 409


class NotSettleable(LedgerError):
    """Only a decided ticket whose delivery failed, and not yet settled, can be settled."""

    http_status = 409

    def __init__(self, ticket: Ticket) -> None:
        self.ticket = ticket
        state = (
            "still pending" if ticket.status == PENDING
            else "already delivered to its conversation" if ticket.delivered_at
            else f"already settled by {ticket.settled_by}" if ticket.settled_at
            else "not yet shown to be undeliverable (no delivery has failed)"
        )
        super().__init__(f"Ticket {ticket.id} is {state}; only a decision that cannot reach its "
                         "conversation is settled.")


def _same_person(user_id: str, name: str) -> bool:
    try:
        return inputs.name(user_id) == name
    except inputs.InputError:
        return False


DAILY_LIMIT, SAME_PURPOSE = "daily_limit", "same_purpose"


class NeedsApproval(LedgerError):
    """A payout within the threshold that the daily rules send to an approver.

    `reason` is DAILY_LIMIT (it would take the requester's total paid without
    approval on `day` above `limit_cents`) or SAME_PURPOSE (`earlier` was paid
    without approval for the same purpose that day). Each surface words it.
    """

    http_status = 409

    def __init__(
        self, reason: str, *, requester: str, day: date, amount_cents: int, limit_cents: int,
        paid_today_cents: int, earlier: Payout | None = None,
    ) -> None:
        self.reason = reason
        self.requester = requester
        self.day = day
        self.amount_cents = amount_cents
        self.limit_cents = limit_cents
        self.paid_today_cents = paid_today_cents
        self.earlier = earlier
        paid = f"${from_cents(paid_today_cents):,}"
        if reason == SAME_PURPOSE and earlier is not None:
            why = (f"{earlier.amount_text} for {earlier.purpose} was already paid without approval "
                   f"to {requester} on {day} (UTC), payout {earlier.id}")
        elif reason == SAME_PURPOSE:
            why = f"the same purpose was already paid without approval to {requester} on {day} (UTC)"
        else:
            why = (f"{paid} already paid without approval to {requester} on {day} (UTC); "
                   f"the daily limit is ${from_cents(limit_cents):,}")
        self.why = why
        super().__init__(f"${from_cents(amount_cents):,} needs approval: {why}.")


def _in(conversation: Conversation) -> Any:
    return (
        (TicketRow.app_name == conversation.app_name)
        & (TicketRow.user_id == conversation.user_id)
        & (TicketRow.session_id == conversation.session_id)
    )


# The counter column is a 32-bit integer on PostgreSQL; a larger limit is no limit.
_MAX_CENTS = 2**31 - 1


class _OverDailyLimit(Exception):
    """Raised inside the payout transaction to roll it back."""


def _new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets readers run beside a writer; busy_timeout makes concurrent
    # writers (ADK's session store shares this file) wait instead of failing
    # with "database is locked".
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


# Seconds a database call waits for a pooled connection. In a burst (1,000
# approvals at once) calls queue for connections for a minute or more; failing
# one halfway would leave a decided ticket undelivered, so they wait instead.
POOL_TIMEOUT_S = 300


def create_engine(url: str) -> AsyncEngine:
    """An async engine for `url`, with SQLite tuned for concurrent writers."""
    if url.startswith("sqlite"):
        # SQLite has one writer at a time. One connection per engine makes a
        # burst queue in the pool, in order; with many connections the writers
        # poll in SQLite's busy handler and some starve past busy_timeout
        # ("database is locked"). An in-memory database has its own pool.
        pool = (
            {"pool_size": 1, "max_overflow": 0, "pool_timeout": POOL_TIMEOUT_S}
            if _ensure_sqlite_dir(url)
            else {}
        )
        engine = create_async_engine(url, connect_args={"timeout": 30}, **pool)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(
        url, pool_size=20, max_overflow=20, pool_pre_ping=True, pool_timeout=POOL_TIMEOUT_S
    )


def _ensure_sqlite_dir(url: str) -> bool:
    """Create the SQLite file's directory; False for an in-memory database."""
    from pathlib import Path

    from sqlalchemy.engine import make_url

    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
        return True
    return False


def _create_missing_indexes(conn: Any) -> None:
    # create_all skips a table that exists, and with it any index declared on
    # it since: a database made by an older version gets its new indexes here.
    # Looked up first (a catalog read, no lock on the table); IF NOT EXISTS
    # for two processes starting at once.
    for table in Base.metadata.sorted_tables:
        for index in table.indexes:
            if index.name and not conn.dialect.has_index(conn, table.name, index.name):
                conn.execute(CreateIndex(index, if_not_exists=True))


def _undelivered() -> Any:
    """The partial index's condition (`_UNDELIVERED_SQL`), as the queries state it."""
    return TicketRow.delivered_at.is_(None) & TicketRow.settled_at.is_(None) & TicketRow.decided_at.is_not(None)


class Ledger:
    """Tickets, payouts and their audit trail in one SQL database."""

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
        from .locks import ConversationLocks

        if self._locks is None:
            self._locks = ConversationLocks(self)
        return self._locks

    async def db(self) -> AsyncSession:
        """A database session, after making sure the tables exist."""
        if not self._schema_ready:
            async with self._schema_lock:
                if not self._schema_ready:
                    from . import locks  # noqa: F401  (its table is part of the schema)

                    async with self.engine.begin() as conn:
                        await conn.run_sync(Base.metadata.create_all)
                        await conn.run_sync(_create_missing_indexes)
                    self._schema_ready = True
        return self._sessions()

    async def ping(self) -> None:
        """Reach the database (for /health): raises if it cannot be reached."""
        async with self.engine.connect() as connection:
            await connection.exec_driver_sql("SELECT 1")

    async def close(self) -> None:
        await self.engine.dispose()

    # --- tickets -----------------------------------------------------------

    async def open_ticket(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        call_id: str,
        call_name: str,
        purpose: str,
        amount_cents: int,
        ttl: timedelta,
        session_store: str = "app",
        note: str | None = None,
    ) -> Ticket:
        """Open a pending ticket; `note` (why it needs approval) goes into its audit trail."""
        now = self._clock()
        row = TicketRow(
            id=_new_id("T"),
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            call_id=call_id,
            call_name=call_name,
            purpose=purpose,
            amount_cents=amount_cents,
            status=PENDING,
            created_at=now,
            expires_at=now + ttl,
            session_store=session_store,
        )
        async with await self.db() as db, db.begin():
            db.add(row)
            detail = f"${from_cents(amount_cents):,} for {purpose}" + (f" (needs approval: {note})" if note else "")
            db.add(AuditRow(ticket_id=row.id, at=now, actor=user_id, action="requested",
                            detail=detail[:500]))
        return Ticket.of(row)

    async def get(self, ticket_id: str) -> Ticket:
        async with await self.db() as db:
            row = await db.get(TicketRow, ticket_id)
        if row is None:
            raise TicketNotFound(
                f"No ticket {ticket_id!r}. List pending tickets with: python main.py inbox"
            )
        return Ticket.of(row)

    async def find_by_call(self, conversation: Conversation, call_id: str) -> Ticket | None:
        """The ticket opened by call `call_id` in this very conversation (app, user and session)."""
        async with await self.db() as db:
            row = await db.scalar(
                select(TicketRow).where(_in(conversation), TicketRow.call_id == call_id)
            )
        return Ticket.of(row) if row else None

    async def undelivered(
        self, conversation: Conversation | None = None, *, limit: int | None = None, offset: int = 0
    ) -> list[Ticket]:
        """Decided tickets whose decision has not reached their conversation, oldest decision first."""
        query = (
            select(TicketRow).where(_undelivered())
            .order_by(TicketRow.decided_at, TicketRow.id).offset(offset).limit(limit)
        )
        if conversation is not None:
            query = query.where(_in(conversation))
        async with await self.db() as db:
            return [Ticket.of(row) for row in await db.scalars(query)]

    async def count_undelivered(self) -> int:
        """How many decisions have not reached their conversation (counted in their partial index)."""
        async with await self.db() as db:
            total = await db.scalar(select(func.count()).select_from(TicketRow).where(_undelivered()))
        return int(total or 0)

    async def list_tickets(self, status: str = PENDING, limit: int = 50, offset: int = 0) -> list[Ticket]:
        """One page of the tickets in `status`, oldest first, in index order (`id` breaks ties)."""
        async with await self.db() as db:
            rows = await db.scalars(
                select(TicketRow).where(TicketRow.status == status)
                .order_by(TicketRow.created_at, TicketRow.id).offset(offset).limit(limit)
            )
            return [Ticket.of(row) for row in rows]

    async def recent_decisions(self, limit: int = 20) -> list[Ticket]:
        """The latest decisions, newest first."""
        async with await self.db() as db:
            rows = await db.scalars(
                select(TicketRow)
                .where(TicketRow.decided_at.is_not(None))
                .order_by(TicketRow.decided_at.desc(), TicketRow.id.desc())
                .limit(limit)
            )
            return [Ticket.of(row) for row in rows]

    async def count(self, status: str = PENDING) -> int:
        """How many tickets are in `status` (counted in the status index)."""
        async with await self.db() as db:
            total = await db.scalar(
                select(func.count()).select_from(TicketRow).where(TicketRow.status == status)
            )
        return int(total or 0)

    async def decide(
        self,
        ticket_id: str,
        *,
        approver: str,
        approve: bool,
        reason: str | None = None,
        from_chat: bool = False,
    ) -> Ticket:
        """Record an approver's decision; the ledger is written before any delivery.

        Raises InputError for a malformed name or reason (the same rules on
        every surface). `from_chat` is DEV_CHAT_APPROVAL: the requester decides
        in the chat, and the trail says so.
        """
        approver = inputs.name(approver, "approver name")
        ticket = await self.get(ticket_id)
        if ticket.status != PENDING:
            hint = (
                f"see its history with: python main.py show {ticket_id}"
                if ticket.delivered_at
                else f"its conversation was not resumed yet; run: python main.py resume {ticket_id}"
            )
            raise AlreadyDecided(
                f"Ticket {ticket_id} is already {ticket.status}"
                f"{f' by {ticket.decided_by}' if ticket.decided_by else ''}; {hint}"
            )
        reason = inputs.reason(reason, required=not approve)
        # One spelling per person: Alice, alice and " alice" are the same requester.
        if _same_person(ticket.user_id, approver) and not from_chat:
            raise NotAllowed(f"{approver} requested ticket {ticket_id} and cannot approve or reject it.")
        if from_chat:
            approver = f"{approver} (chat, DEV_CHAT_APPROVAL)"
        if ticket.expires_at <= self._clock():
            await self.expire(ticket_id)
            raise TicketExpired(
                f"Ticket {ticket_id} expired at {ticket.expires_at:%Y-%m-%d %H:%M} UTC and can "
                "no longer be decided; the requester has to ask again."
            )
        status = APPROVED if approve else REJECTED
        return await self._transition(ticket_id, status, actor=approver, reason=reason)

    async def expire(self, ticket_id: str) -> Ticket:
        return await self._transition(ticket_id, EXPIRED, actor="system", reason="approval window ended")

    async def cancel(self, ticket_id: str, *, actor: str, reason: str | None = None) -> Ticket:
        return await self._transition(ticket_id, CANCELLED, actor=actor, reason=reason)

    async def expire_due(self, conversation: Conversation | None = None) -> list[str]:
        """Expire every pending ticket whose window has ended; returns their ids."""
        now = self._clock()
        query = select(TicketRow.id).where(TicketRow.status == PENDING, TicketRow.expires_at <= now)
        if conversation is not None:
            query = query.where(_in(conversation))
        async with await self.db() as db:
            due = list(await db.scalars(query))
        expired = []
        for ticket_id in due:
            try:
                await self.expire(ticket_id)
                expired.append(ticket_id)
            except AlreadyDecided:
                pass
        return expired

    async def _transition(
        self, ticket_id: str, status: str, *, actor: str, reason: str | None
    ) -> Ticket:
        now = self._clock()
        async with await self.db() as db, db.begin():
            changed: CursorResult[Any] = await db.execute(  # type: ignore[assignment]
                update(TicketRow)
                .where(TicketRow.id == ticket_id, TicketRow.status == PENDING)
                .values(status=status, decided_by=actor, decided_at=now, reason=reason)
            )
            if changed.rowcount != 1:
                current = await db.get(TicketRow, ticket_id)
                if current is None:
                    raise TicketNotFound(f"No ticket {ticket_id!r}.")
                raise AlreadyDecided(
                    f"Ticket {ticket_id} is already {current.status}"
                    f"{f' by {current.decided_by}' if current.decided_by else ''}."
                )
            db.add(AuditRow(ticket_id=ticket_id, at=now, actor=actor, action=status, detail=reason))
        return await self.get(ticket_id)

    async def open_in(self, conversation: Conversation) -> list[Ticket]:
        """Tickets that still need this conversation: pending, or decided and not yet delivered."""
        async with await self.db() as db:
            rows = await db.scalars(select(TicketRow).where(
                _in(conversation),
                (TicketRow.status == PENDING)
                | (TicketRow.delivered_at.is_(None) & TicketRow.settled_at.is_(None)),
            ))
            return [Ticket.of(row) for row in rows]

    async def settle(self, ticket_id: str, *, approver: str) -> tuple[Ticket, Payout | None]:
        """Finish a decision that cannot reach its conversation: pay an approved one, close the rest.

        Only after a delivery failed (`delivery_error` is set): while the
        conversation can be reached, the requester is told there.
        """
        approver = inputs.name(approver, "approver name")
        ticket = await self.get(ticket_id)
        if ticket.status == PENDING or ticket.delivered_at or ticket.settled_at or not ticket.delivery_error:
            raise NotSettleable(ticket)
        now = self._clock()
        payout_row = None
        try:
            async with await self.db() as db, db.begin():
                changed: CursorResult[Any] = await db.execute(  # type: ignore[assignment]
                    update(TicketRow)
                    .where(TicketRow.id == ticket_id, TicketRow.settled_at.is_(None),
                           TicketRow.delivered_at.is_(None))
                    .values(settled_by=approver, settled_at=now)
                )
                if changed.rowcount != 1:
                    raise NotSettleable(await self.get(ticket_id))
                if ticket.status == APPROVED:
                    # The approval is the authority; the payout is still one per ticket.
                    payout_row = PayoutRow(
                        id=_new_id("P"), ticket_id=ticket.id, app_name=ticket.app_name, call_id=f"settled:{ticket.id}",
                        user_id=ticket.user_id, session_id=ticket.session_id, purpose=ticket.purpose,
                        amount_cents=ticket.amount_cents, paid_at=now,
                    )
                    db.add(payout_row)
                    db.add(AuditRow(ticket_id=ticket.id, at=now, actor=approver, action="paid",
                                    detail=f"{payout_row.id}, without the conversation"))
                db.add(AuditRow(ticket_id=ticket.id, at=now, actor=approver, action="settled",
                                detail=f"the conversation could not be told: {ticket.delivery_error}"[:500]))
        except IntegrityError:
            raise NotSettleable(await self.get(ticket_id)) from None  # paid meanwhile
        return await self.get(ticket_id), Payout.of(payout_row) if payout_row else None

    async def mark_delivered(self, ticket_id: str, *, actor: str) -> bool:
        """Record that the decision reached the conversation; False if it already had."""
        now = self._clock()
        async with await self.db() as db, db.begin():
            changed: CursorResult[Any] = await db.execute(  # type: ignore[assignment]
                update(TicketRow)
                .where(TicketRow.id == ticket_id, TicketRow.delivered_at.is_(None))
                .values(delivered_at=now, delivery_error=None)
            )
            if changed.rowcount != 1:
                return False
            db.add(AuditRow(ticket_id=ticket_id, at=now, actor=actor, action="delivered",
                            detail="the decision reached the conversation"))
        return True

    async def mark_undelivered(self, ticket_id: str, *, actor: str, error: str) -> None:
        """Record why a delivery did not happen, so people can see it and act."""
        async with await self.db() as db, db.begin():
            await db.execute(
                update(TicketRow)
                .where(TicketRow.id == ticket_id, TicketRow.delivered_at.is_(None))
                .values(delivery_error=error[:500])
            )
            db.add(AuditRow(ticket_id=ticket_id, at=self._clock(), actor=actor,
                            action="undelivered", detail=error[:500]))

    async def record_refusal(self, ticket_id: str, *, actor: str, detail: str) -> None:
        async with await self.db() as db, db.begin():
            db.add(AuditRow(ticket_id=ticket_id, at=self._clock(), actor=actor,
                            action="refused", detail=detail[:500]))

    async def audit(self, ticket_id: str) -> list[AuditEntry]:
        async with await self.db() as db:
            rows = await db.scalars(
                select(AuditRow).where(AuditRow.ticket_id == ticket_id).order_by(AuditRow.id)
            )
            return [AuditEntry(_utc(r.at), r.actor, r.action, r.detail) for r in rows]  # type: ignore[arg-type]

    # --- payouts -----------------------------------------------------------

    async def pay_approved(
        self, *, conversation: Conversation, call_id: str, purpose: str, amount_cents: int
    ) -> tuple[Payout, bool]:
        """Pay the approved ticket of this session matching purpose and amount.

        Returns (payout, already_paid). Raises NotApproved when no approved
        ticket matches: whatever the conversation says, no ticket, no money.
        """
        matching = await self._approved_tickets(conversation, purpose, amount_cents)
        # An unpaid match first; a paid one only to report "already paid".
        matching.sort(key=lambda pair: pair[1])
        ticket = matching[0][0] if matching else None
        if ticket is None:
            raise NotApproved(
                f"No approved ticket for ${from_cents(amount_cents):,} ({purpose}) in this "
                "conversation. Amounts above the limit are paid only after an approver "
                "approves the ticket from ask_for_approval."
            )
        return await self._insert_payout(
            ticket_id=ticket.id, app_name=conversation.app_name, call_id=call_id,
            user_id=conversation.user_id, session_id=conversation.session_id,
            purpose=ticket.purpose, amount_cents=amount_cents,
        )

    async def _approved_tickets(
        self, conversation: Conversation, purpose: str, amount_cents: int
    ) -> list[tuple[TicketRow, bool]]:
        """Approved tickets of this conversation for purpose and amount, oldest first, with "paid?"."""
        async with await self.db() as db:
            candidates = (await db.execute(
                select(TicketRow, PayoutRow.id)
                .outerjoin(PayoutRow, PayoutRow.ticket_id == TicketRow.id)
                .where(
                    _in(conversation),
                    TicketRow.amount_cents == amount_cents,
                    TicketRow.status == APPROVED,
                )
                .order_by(TicketRow.created_at)
            )).all()
        wanted = purpose.casefold()
        return [(t, paid is not None) for t, paid in candidates if t.purpose.casefold() == wanted]

    async def pay_small(
        self, *, conversation: Conversation, call_id: str, purpose: str, amount_cents: int,
        requester: str, purpose_key: str, daily_limit_cents: int,
    ) -> tuple[Payout, bool]:
        """Pay an amount within the approval threshold; returns (payout, already_paid).

        A re-run of a call that already paid reports that payout. An approved,
        unpaid ticket of this conversation for the purpose and amount (one the
        daily rules sent to an approver) pays through that ticket. Anything
        else is paid without approval if the daily rules allow it, and raises
        NeedsApproval if not.
        """
        earlier = await self._payout_of_call(conversation, call_id)
        if earlier is not None:
            return earlier, True
        for ticket, paid in await self._approved_tickets(conversation, purpose, amount_cents):
            if not paid:
                return await self._insert_payout(
                    ticket_id=ticket.id, app_name=conversation.app_name, call_id=call_id,
                    user_id=conversation.user_id, session_id=conversation.session_id,
                    purpose=ticket.purpose, amount_cents=amount_cents,
                )
        return await self._pay_without_approval(
            conversation=conversation, call_id=call_id, purpose=purpose, amount_cents=amount_cents,
            requester=requester, purpose_key=purpose_key, limit_cents=daily_limit_cents,
        )

    # --- the daily rules for payouts without approval ---------------------------

    def day(self) -> date:
        """The day the daily rules count in: the UTC calendar day of the ledger's clock."""
        return self._clock().astimezone(UTC).date()

    async def paid_without_approval(self, requester: str, day: date | None = None) -> int:
        """Cents paid to `requester` without approval on `day` (default: today, UTC)."""
        async with await self.db() as db:
            total = await db.scalar(
                select(DailyAutoApprovalRow.total_cents).where(
                    DailyAutoApprovalRow.requester == requester,
                    DailyAutoApprovalRow.day == (day or self.day()),
                )
            )
        return int(total or 0)

    async def auto_approval_refusal(
        self, *, requester: str, purpose_key: str, amount_cents: int, daily_limit_cents: int
    ) -> NeedsApproval | None:
        """Why the daily rules would send this payout to an approver now, or None.

        A read, not a reservation: it says whether a small request may open a
        ticket. Only `pay_small` decides, in the database.
        """
        return await self._refusal(
            requester=requester, day=self.day(), purpose_key=purpose_key,
            amount_cents=amount_cents, limit_cents=min(daily_limit_cents, _MAX_CENTS),
        )

    async def _refusal(
        self, *, requester: str, day: date, purpose_key: str, amount_cents: int, limit_cents: int
    ) -> NeedsApproval | None:
        earlier = await self._auto_payout_for(requester, day, purpose_key)
        paid_today = await self.paid_without_approval(requester, day)
        if earlier is None and paid_today + amount_cents <= limit_cents:
            return None
        return NeedsApproval(
            SAME_PURPOSE if earlier else DAILY_LIMIT, requester=requester, day=day,
            amount_cents=amount_cents, limit_cents=limit_cents, paid_today_cents=paid_today,
            earlier=earlier,
        )

    async def _pay_without_approval(
        self, *, conversation: Conversation, call_id: str, purpose: str, amount_cents: int,
        requester: str, purpose_key: str, limit_cents: int,
    ) -> tuple[Payout, bool]:
        now = self._clock()
        day = now.astimezone(UTC).date()
        limit_cents = min(limit_cents, _MAX_CENTS)
        row = PayoutRow(
            id=_new_id("P"), paid_at=now, ticket_id=None, app_name=conversation.app_name,
            call_id=call_id, user_id=conversation.user_id, session_id=conversation.session_id,
            purpose=purpose, amount_cents=amount_cents,
        )
        # One transaction: the counter, the payout and its same-purpose key
        # stand or fall together. The counter goes first, so concurrent payouts
        # of one requester queue on its row and each sees the others' totals.
        try:
            if amount_cents > limit_cents:
                raise _OverDailyLimit
            async with await self.db() as db, db.begin():
                added: CursorResult[Any] = await db.execute(  # type: ignore[assignment]
                    self._add_to_daily_total(requester, day, amount_cents, limit_cents)
                )
                if added.rowcount != 1:
                    raise _OverDailyLimit
                db.add(row)
                await db.flush()
                db.add(AutoApprovedPayoutRow(
                    payout_id=row.id, requester=requester, day=day, purpose_key=purpose_key,
                ))
                await db.flush()
            return Payout.of(row), False
        except (_OverDailyLimit, IntegrityError):
            # A re-run of this call that raced the first: report its payout.
            earlier = await self._payout_of_call(conversation, call_id)
            if earlier is not None:
                return earlier, True
            # What refused it is committed (totals only grow, keys are never
            # removed), so reading it back now explains the refusal.
            refusal = await self._refusal(
                requester=requester, day=day, purpose_key=purpose_key,
                amount_cents=amount_cents, limit_cents=limit_cents,
            )
            if refusal is not None:
                raise refusal from None
            raise

    def _add_to_daily_total(self, requester: str, day: date, amount_cents: int, limit_cents: int) -> Any:
        """`total += amount` for (requester, day) only while it stays within the limit: one statement.

        An INSERT ... ON CONFLICT DO UPDATE ... WHERE, the same on SQLite and
        PostgreSQL: it creates the day's row or raises it, or changes nothing
        (rowcount 0) when the total would pass the limit.
        """
        insert = postgresql_insert if self.engine.dialect.name == "postgresql" else sqlite_insert
        statement = insert(DailyAutoApprovalRow).values(requester=requester, day=day, total_cents=amount_cents)
        raised = DailyAutoApprovalRow.total_cents + statement.excluded.total_cents
        return statement.on_conflict_do_update(
            index_elements=[DailyAutoApprovalRow.requester, DailyAutoApprovalRow.day],
            set_={"total_cents": raised},
            where=raised <= limit_cents,
        )

    async def _auto_payout_for(self, requester: str, day: date, purpose_key: str) -> Payout | None:
        async with await self.db() as db:
            row = await db.scalar(
                select(PayoutRow)
                .join(AutoApprovedPayoutRow, AutoApprovedPayoutRow.payout_id == PayoutRow.id)
                .where(
                    AutoApprovedPayoutRow.requester == requester,
                    AutoApprovedPayoutRow.day == day,
                    AutoApprovedPayoutRow.purpose_key == purpose_key,
                )
            )
        return Payout.of(row) if row else None

    async def _payout_of_call(self, conversation: Conversation, call_id: str) -> Payout | None:
        async with await self.db() as db:
            row = await db.scalar(select(PayoutRow).where(
                PayoutRow.app_name == conversation.app_name, PayoutRow.user_id == conversation.user_id,
                PayoutRow.session_id == conversation.session_id, PayoutRow.call_id == call_id,
            ))
        return Payout.of(row) if row else None

    async def _insert_payout(self, **fields: Any) -> tuple[Payout, bool]:
        row = PayoutRow(id=_new_id("P"), paid_at=self._clock(), **fields)
        try:
            async with await self.db() as db, db.begin():
                db.add(row)
                if fields["ticket_id"]:
                    db.add(AuditRow(ticket_id=fields["ticket_id"], at=row.paid_at,
                                    actor="reimburse", action="paid", detail=row.id))
            return Payout.of(row), False
        except IntegrityError:
            # Someone paid this ticket (or ran this call) first: report that
            # payout instead of making a second one.
            async with await self.db() as db:
                key = (
                    PayoutRow.ticket_id == fields["ticket_id"]
                    if fields["ticket_id"]
                    else (PayoutRow.app_name == fields["app_name"]) & (PayoutRow.user_id == fields["user_id"])
                    & (PayoutRow.session_id == fields["session_id"]) & (PayoutRow.call_id == fields["call_id"])
                )
                existing = await db.scalar(select(PayoutRow).where(key))
            if existing is None:
                raise
            return Payout.of(existing), True

    async def payouts(self, *, session_id: str | None = None, ticket_id: str | None = None) -> list[Payout]:
        query = select(PayoutRow).order_by(PayoutRow.paid_at)
        if session_id is not None:
            query = query.where(PayoutRow.session_id == session_id)
        if ticket_id is not None:
            query = query.where(PayoutRow.ticket_id == ticket_id)
        async with await self.db() as db:
            return [Payout.of(row) for row in await db.scalars(query)]


_ledgers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Ledger]] = (
    weakref.WeakKeyDictionary()
)


def get_ledger(url: str) -> Ledger:
    """The ledger for `url` in the running event loop.

    Async engines hold connections bound to one event loop, so each loop (a
    test, a CLI command, a server) gets its own.
    """
    per_loop = _ledgers.setdefault(asyncio.get_running_loop(), {})
    if url not in per_loop:
        per_loop[url] = Ledger(url)
    return per_loop[url]


async def close_ledgers() -> None:
    """Dispose the engines of the running loop's ledgers (end of a test or command)."""
    for ledger in _ledgers.pop(asyncio.get_running_loop(), {}).values():
        await ledger.close()
