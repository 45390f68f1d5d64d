"""Payouts: one per ticket and one per tool call, and the daily rules for payouts without approval.

Above the threshold only an approved, unpaid ticket of the same conversation
pays, and a UNIQUE ticket column makes that once. Within the threshold the
requester's payouts without approval are capped per UTC day by a conditional
upsert (`... WHERE total + amount <= limit`), and are UNIQUE per requester,
day and purpose; what the rules refuse goes to an approver (`NeedsApproval`).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, date
from types import SimpleNamespace
from typing import Any

from sqlalchemy import bindparam, insert, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from ..refusals.rules import DAILY_LIMIT, SAME_PURPOSE, NeedsApproval, NotApproved
from .database import Database, new_id
from .records import Conversation, Payout, Ticket, TicketStatus
from .schema import (
    AUDIT,
    IN_BOUND_CONVERSATION,
    TICKET_COLUMNS,
    AuditRow,
    AutoApprovedPayoutRow,
    DailyAutoApprovalRow,
    PayoutRow,
    TicketRow,
    conversation_params,
)

# The counter column is a 32-bit integer on PostgreSQL; a larger limit is no limit.
_MAX_CENTS = 2**31 - 1


_PAY = insert(PayoutRow)
# Approved tickets of one conversation for an amount (asked or approved), with their payout if any, oldest first.
_APPROVED = (
    select(*TICKET_COLUMNS, PayoutRow.id.label("payout_id"))
    .outerjoin(PayoutRow, PayoutRow.ticket_id == TicketRow.id)
    .where(
        IN_BOUND_CONVERSATION,
        (TicketRow.amount_cents == bindparam("cents")) | (TicketRow.approved_cents == bindparam("cents")),
        TicketRow.status == TicketStatus.APPROVED,
    )
    .order_by(TicketRow.created_at)
)


class _OverDailyLimit(Exception):
    """Raised inside the payout transaction to roll it back."""


class Payouts:
    """Money paid out: through an approved ticket, or within the threshold under the daily rules."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def pay_approved(
        self, *, conversation: Conversation, call_id: str, purpose: str, amount_cents: int,
        prefer: Collection[Ticket] = (),
    ) -> tuple[Payout, bool]:
        """Pay the approved ticket of this session matching purpose and amount.

        The amount may be what was asked or what was approved; the payout is
        what was approved, never more. Among equal matches, a ticket in
        `prefer` (the decisions the current run delivers, as the ledger read
        them under the conversation's lock) is paid first.
        Returns (payout, already_paid). Raises NotApproved when no approved
        ticket matches: whatever the conversation says, no ticket, no money.
        """
        wanted = purpose.casefold()
        delivered_now = sorted(
            (t for t in prefer if t.status is TicketStatus.APPROVED and t.conversation == conversation
             and t.purpose.casefold() == wanted and amount_cents in (t.amount_cents, t.approved_cents)),
            key=lambda t: t.created_at)
        if delivered_now:
            # The ticket this run delivers, read from the ledger under the lock: paid without
            # reading it again. The payout's UNIQUE ticket keeps it to one; if it was paid
            # before, the full reading below says so.
            try:
                async with self.database.transaction() as db:
                    return await self._pay(db, delivered_now[0], conversation, call_id), False
            except IntegrityError:
                pass
        # One transaction: the matching tickets read, the payout and its audit entry written.
        preferred = {t.id for t in prefer}
        ticket = None
        try:
            async with self.database.transaction() as db:
                matching = await self._approved_tickets(conversation, purpose, amount_cents, db)
                # An unpaid match first; a paid one only to report "already paid". Of two equal
                # tickets, the one whose approval this run delivers: the other one's approval has
                # not reached the conversation yet, and pays when it does.
                matching.sort(key=lambda pair: (pair[1], pair[0].id not in preferred))
                ticket = matching[0][0] if matching else None
                if ticket is None:
                    raise NotApproved(purpose, amount_cents)
                return await self._pay(db, ticket, conversation, call_id), False
        except IntegrityError:
            # Someone paid this ticket first: report that payout.
            assert ticket is not None  # the conflict was its payout's
            earlier = await self._earlier_payout(ticket_id=ticket.id)
            if earlier is None:
                raise
            return earlier

    async def _pay(self, db: AsyncConnection, ticket: Any, conversation: Conversation, call_id: str) -> Payout:
        """Write the payout of approved `ticket` (what was approved) and its audit entry, in `db`'s transaction."""
        payout = {
            "id": new_id("P"), "paid_at": self.database.now(), "ticket_id": ticket.id,
            "app_name": conversation.app_name, "call_id": call_id, "user_id": conversation.user_id,
            "session_id": conversation.session_id, "purpose": ticket.purpose,
            "amount_cents": ticket.amount_cents if ticket.approved_cents is None else ticket.approved_cents,
        }
        await db.execute(_PAY, payout)
        await db.execute(AUDIT, {"ticket_id": ticket.id, "at": payout["paid_at"], "actor": "reimburse",
                                 "action": "paid", "detail": payout["id"]})
        return Payout.of(SimpleNamespace(**payout))

    async def _approved_tickets(
        self, conversation: Conversation, purpose: str, amount_cents: int, db: Any = None
    ) -> list[tuple[Any, bool]]:
        """Approved tickets of this conversation for purpose and amount (asked or approved), oldest first.

        In `db`'s transaction, or in a session of its own.
        """
        if db is None:
            async with self.database.transaction() as own:
                return await self._approved_tickets(conversation, purpose, amount_cents, own)
        candidates = (await db.execute(_APPROVED, {**conversation_params(conversation), "cents": amount_cents})).all()
        wanted = purpose.casefold()
        return [(t, t.payout_id is not None) for t in candidates if t.purpose.casefold() == wanted]

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
                    purpose=ticket.purpose,
                    amount_cents=ticket.amount_cents if ticket.approved_cents is None else ticket.approved_cents,
                )
        return await self._pay_without_approval(
            conversation=conversation, call_id=call_id, purpose=purpose, amount_cents=amount_cents,
            requester=requester, purpose_key=purpose_key, limit_cents=daily_limit_cents,
        )

    # --- the daily rules for payouts without approval ---------------------------

    def day(self) -> date:
        """The day the daily rules count in: the UTC calendar day of the ledger's clock."""
        return self.database.now().astimezone(UTC).date()

    async def paid_without_approval(self, requester: str, day: date | None = None) -> int:
        """Cents paid to `requester` without approval on `day` (default: today, UTC)."""
        async with await self.database.session() as db:
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
        now = self.database.now()
        day = now.astimezone(UTC).date()
        limit_cents = min(limit_cents, _MAX_CENTS)
        row = PayoutRow(
            id=new_id("P"), paid_at=now, ticket_id=None, app_name=conversation.app_name,
            call_id=call_id, user_id=conversation.user_id, session_id=conversation.session_id,
            purpose=purpose, amount_cents=amount_cents,
        )
        # One transaction: the counter, the payout and its same-purpose key
        # stand or fall together. The counter goes first, so concurrent payouts
        # of one requester queue on its row and each sees the others' totals.
        try:
            if amount_cents > limit_cents:
                raise _OverDailyLimit
            async with await self.database.session() as db, db.begin():
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
        insert = postgresql_insert if self.database.is_postgresql else sqlite_insert
        statement = insert(DailyAutoApprovalRow).values(requester=requester, day=day, total_cents=amount_cents)
        raised = DailyAutoApprovalRow.total_cents + statement.excluded.total_cents
        return statement.on_conflict_do_update(
            index_elements=[DailyAutoApprovalRow.requester, DailyAutoApprovalRow.day],
            set_={"total_cents": raised},
            where=raised <= limit_cents,
        )

    async def _auto_payout_for(self, requester: str, day: date, purpose_key: str) -> Payout | None:
        async with await self.database.session() as db:
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
        async with await self.database.session() as db:
            row = await db.scalar(select(PayoutRow).where(
                PayoutRow.app_name == conversation.app_name, PayoutRow.user_id == conversation.user_id,
                PayoutRow.session_id == conversation.session_id, PayoutRow.call_id == call_id,
            ))
        return Payout.of(row) if row else None

    async def _insert_payout(self, **fields: Any) -> tuple[Payout, bool]:
        row = PayoutRow(id=new_id("P"), paid_at=self.database.now(), **fields)
        try:
            async with await self.database.session() as db, db.begin():
                db.add(row)
                if fields["ticket_id"]:
                    db.add(AuditRow(ticket_id=fields["ticket_id"], at=row.paid_at,
                                    actor="reimburse", action="paid", detail=row.id))
            return Payout.of(row), False
        except IntegrityError:
            # Someone paid this ticket (or ran this call) first: report that
            # payout instead of making a second one.
            earlier = await self._earlier_payout(**fields)
            if earlier is None:
                raise
            return earlier

    async def _earlier_payout(self, **fields: Any) -> tuple[Payout, bool] | None:
        """The payout an insert of `fields` ran into: its ticket's, or its call's (None: another conflict)."""
        key = (
            PayoutRow.ticket_id == fields["ticket_id"]
            if fields.get("ticket_id")
            else (PayoutRow.app_name == fields["app_name"]) & (PayoutRow.user_id == fields["user_id"])
            & (PayoutRow.session_id == fields["session_id"]) & (PayoutRow.call_id == fields["call_id"])
        )
        async with await self.database.session() as db:
            existing = await db.scalar(select(PayoutRow).where(key))
        return (Payout.of(existing), True) if existing is not None else None

    async def find(self, *, session_id: str | None = None, ticket_id: str | None = None) -> list[Payout]:
        """The payouts of a conversation's session, or of a ticket (or every payout), oldest first."""
        query = select(PayoutRow).order_by(PayoutRow.paid_at)
        if session_id is not None:
            query = query.where(PayoutRow.session_id == session_id)
        if ticket_id is not None:
            query = query.where(PayoutRow.ticket_id == ticket_id)
        async with await self.database.session() as db:
            return [Payout.of(row) for row in await db.scalars(query)]
