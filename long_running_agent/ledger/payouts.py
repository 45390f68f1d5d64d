"""Payouts: one per ticket and one per tool call, and the daily rules for payouts without approval.

Both hold in the database: a UNIQUE ticket column, and a conditional upsert of the day's total
(docs/security.md: split purchases).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, date, datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy import bindparam, insert, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from ..refusals.rules import DAILY_LIMIT, SAME_PURPOSE, NeedsApproval, NotApproved
from .audit import chain
from .policy import request_totals
from .records import Conversation, Payout, Ticket, TicketStatus
from .storage.database import Database, new_id
from .storage.schema import (
    IN_BOUND_CONVERSATION,
    TICKET_COLUMNS,
    AutoApprovedPayoutRow,
    DailyAutoApprovalRow,
    PayoutRow,
    TicketRow,
    conversation_params,
    in_conversation,
)

# The counter column is a 32-bit integer on PostgreSQL; a larger limit is no limit.
_MAX_CENTS = 2**31 - 1

_PAY = insert(PayoutRow)
_SAME_PURPOSE_KEY = insert(AutoApprovedPayoutRow)
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


async def pay_ticket(
    db: AsyncConnection, ticket: Any, conversation: Conversation, call_id: str, at: datetime, *,
    actor: str = "reimburse", note: str = "",
) -> Payout:
    """Pay approved `ticket` (what was approved, never more) in `db`'s transaction; a second raises IntegrityError."""
    cents = ticket.amount_cents if ticket.approved_cents is None else ticket.approved_cents
    payout = _payout(conversation, call_id, ticket.purpose, cents, at, ticket_id=ticket.id)
    # The audit entry first: it locks the ticket, as a decision or a settlement does before its payout, so that
    # racing them waits instead of deadlocking on the payout's UNIQUE ticket (PostgreSQL).
    await chain.write(db, ticket.id, at=at, actor=actor, action="paid", detail=f"{payout['id']}{note}",
                      facts={PayoutRow.__tablename__: payout})
    await db.execute(_PAY, payout)
    return Payout.of(SimpleNamespace(**payout))


def _payout(
    conversation: Conversation, call_id: str, purpose: str, cents: int, at: datetime, ticket_id: str | None = None
) -> dict[str, Any]:
    return {"id": new_id("P"), "paid_at": at, "ticket_id": ticket_id, "app_name": conversation.app_name,
            "call_id": call_id, "user_id": conversation.user_id, "session_id": conversation.session_id,
            "purpose": purpose, "amount_cents": cents}


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
        """Pay the approved ticket of this conversation for purpose and amount (asked or approved), never more.

        `prefer`: the decisions this run delivers, read under the conversation's lock, paid first without a new read.
        Returns (payout, already_paid); raises NotApproved when no approved ticket matches: no ticket, no money.
        """
        wanted = purpose.casefold()
        delivered_now = sorted(
            (t for t in prefer if t.status is TicketStatus.APPROVED and t.conversation == conversation
             and t.purpose.casefold() == wanted and amount_cents in (t.amount_cents, t.approved_cents)),
            key=lambda t: t.created_at)
        if delivered_now:
            # If it was paid before, the full reading below says so.
            try:
                async with self.database.transaction() as db:
                    return await pay_ticket(db, delivered_now[0], conversation, call_id, self.database.now()), False
            except IntegrityError:
                pass
        paid = await self._pay_matching(conversation, call_id, purpose, amount_cents, prefer, paid_too=True)
        if paid is None:
            raise NotApproved(purpose, amount_cents)
        return paid

    async def pay_small(
        self, *, conversation: Conversation, call_id: str, purpose: str, amount_cents: int,
        requester: str, purpose_key: str, daily_limit_cents: int,
    ) -> tuple[Payout, bool]:
        """Pay an amount within the threshold; returns (payout, already_paid), or raises NeedsApproval."""
        earlier = await self._payout_of_call(conversation, call_id)
        if earlier is not None:
            return earlier, True
        paid = await self._pay_matching(conversation, call_id, purpose, amount_cents, paid_too=False)
        if paid is not None:
            return paid
        return await self._pay_without_approval(
            conversation=conversation, call_id=call_id, purpose=purpose, amount_cents=amount_cents,
            requester=requester, purpose_key=purpose_key, limit_cents=daily_limit_cents,
        )

    async def _pay_matching(
        self, conversation: Conversation, call_id: str, purpose: str, amount_cents: int,
        prefer: Collection[Ticket] = (), *, paid_too: bool,
    ) -> tuple[Payout, bool] | None:
        """Pay an approved ticket of this conversation for purpose and amount (asked or approved); None if none.

        An unpaid match first; a paid one only to report "already paid" (`paid_too`). Of two equal tickets, the one
        in `prefer`: the other one's approval has not reached the conversation yet, and pays when it does.
        """
        wanted, preferred = purpose.casefold(), {t.id for t in prefer}
        ticket = None
        try:
            async with self.database.transaction() as db:
                rows = await db.execute(_APPROVED, {**conversation_params(conversation), "cents": amount_cents})
                matching = sorted((t for t in rows if t.purpose.casefold() == wanted),
                                  key=lambda t: (t.payout_id is not None, t.id not in preferred))
                if not matching or (matching[0].payout_id is not None and not paid_too):
                    return None
                ticket = matching[0]
                return await pay_ticket(db, ticket, conversation, call_id, self.database.now()), False
        except IntegrityError:
            # Someone paid this ticket first: report that payout.
            earlier = await self.find(ticket_id=ticket.id) if ticket is not None else []
            if not earlier:
                raise
            return earlier[0], True

    def day(self) -> date:
        """The day the daily rules count in: the UTC calendar day of the ledger's clock."""
        return self.database.now().astimezone(UTC).date()

    async def paid_without_approval(self, requester: str, day: date | None = None) -> int:
        """Cents paid to `requester` without approval on `day` (default: today, UTC)."""
        async with await self.database.session() as db:
            total = await db.scalar(select(DailyAutoApprovalRow.total_cents).where(
                DailyAutoApprovalRow.requester == requester, DailyAutoApprovalRow.day == (day or self.day())))
        return int(total or 0)

    async def auto_approval_refusal(
        self, *, requester: str, purpose_key: str, amount_cents: int, daily_limit_cents: int, day: date | None = None
    ) -> NeedsApproval | None:
        """Why the daily rules would send this payout to an approver on `day`, or None: a read, not a reservation."""
        day, limit_cents = day or self.day(), min(daily_limit_cents, _MAX_CENTS)
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
        payout = _payout(conversation, call_id, purpose, amount_cents, now)
        # The counter, the payout and its same-purpose key stand or fall together. The counter goes first, so
        # concurrent payouts of one requester queue on its row and each sees the others' totals.
        try:
            if amount_cents > limit_cents:
                raise _OverDailyLimit
            async with self.database.transaction() as db:
                added = await db.execute(self._add_to_daily_total(requester, day, amount_cents, limit_cents))
                if added.rowcount != 1:
                    raise _OverDailyLimit
                await db.execute(_PAY, payout)
                # No ticket to chain it to: the payout's own chain, keyed by its id (chain.start).
                await chain.start(db, payout["id"], at=now, actor="reimburse", action="paid",
                                  detail="without approval, under the daily rules",
                                  facts={PayoutRow.__tablename__: payout})
                await db.execute(_SAME_PURPOSE_KEY, {"payout_id": payout["id"], "requester": requester, "day": day,
                                                     "purpose_key": purpose_key})
                # Paid is part of what the requester got that day: the two-person rule counts it too.
                await request_totals.add(db, requester, day, [request_totals.REQUESTER], amount_cents)
            return Payout.of(SimpleNamespace(**payout)), False
        except (_OverDailyLimit, IntegrityError):
            # A re-run of this call that raced the first: report its payout.
            earlier = await self._payout_of_call(conversation, call_id)
            if earlier is not None:
                return earlier, True
            # What refused it is committed (totals only grow, keys are never removed): reading it back explains it.
            refusal = await self.auto_approval_refusal(
                requester=requester, purpose_key=purpose_key, amount_cents=amount_cents,
                daily_limit_cents=limit_cents, day=day,
            )
            if refusal is not None:
                raise refusal from None
            raise

    def _add_to_daily_total(self, requester: str, day: date, amount_cents: int, limit_cents: int) -> Any:
        """`total += amount` for (requester, day) only while it stays within the limit; else rowcount 0."""
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
                select(PayoutRow).join(AutoApprovedPayoutRow, AutoApprovedPayoutRow.payout_id == PayoutRow.id)
                .where(AutoApprovedPayoutRow.requester == requester, AutoApprovedPayoutRow.day == day,
                       AutoApprovedPayoutRow.purpose_key == purpose_key)
            )
        return Payout.of(row) if row else None

    async def _payout_of_call(self, conversation: Conversation, call_id: str) -> Payout | None:
        async with await self.database.session() as db:
            row = await db.scalar(
                select(PayoutRow).where(in_conversation(conversation, PayoutRow), PayoutRow.call_id == call_id)
            )
        return Payout.of(row) if row else None

    async def find(self, *, session_id: str | None = None, ticket_id: str | None = None) -> list[Payout]:
        """The payouts of a conversation's session, or of a ticket (or every payout), oldest first."""
        query = select(PayoutRow).order_by(PayoutRow.paid_at)
        if session_id is not None:
            query = query.where(PayoutRow.session_id == session_id)
        if ticket_id is not None:
            query = query.where(PayoutRow.ticket_id == ticket_id)
        async with await self.database.session() as db:
            return [Payout.of(row) for row in await db.scalars(query)]
