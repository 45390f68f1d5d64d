"""Deliveries: whether each decision reached its conversation, and settling those that never can (docs/delivery.md).

The run that delivers a decision records it under the conversation's lock (storage/locks.py); a failed one records why.
An approval is delivered only with its payout: a run that ended without paying it is a failed attempt (`UNPAID`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from sqlalchemy import Select, bindparam, exists, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from ..error_text import without_sql
from ..refusals.rules import NotSettleable
from . import inputs
from .audit import chain
from .payouts import pay_ticket
from .records import Conversation, Payout, Ticket, TicketStatus
from .storage.database import Database
from .storage.schema import (
    IN_BOUND_CONVERSATION,
    TICKET_COLUMNS,
    AuditRow,
    PayoutRow,
    TicketRow,
    conversation_params,
    in_conversation,
    undelivered,
)
from .tickets import Tickets, row_of

logger = logging.getLogger(__name__)


def undelivered_in(
    conversation: Conversation | None = None, limit: int | None = None, offset: int = 0
) -> Select[TicketRow]:
    """Decided tickets whose decision has not reached their conversation, oldest decision first."""
    query = (select(TicketRow).where(undelivered())
             .order_by(TicketRow.decided_at, TicketRow.id).offset(offset).limit(limit))
    return query if conversation is None else query.where(in_conversation(conversation))


_OPEN_IN = select(*TICKET_COLUMNS).where(
    IN_BOUND_CONVERSATION,
    (TicketRow.status == TicketStatus.PENDING) | (TicketRow.delivered_at.is_(None) & TicketRow.settled_at.is_(None)),
)
# An approved ticket counts as delivered only with its payout: once the run delivering it has ended unpaid (the
# agent did not call `reimburse`, or called it with what `reimburse` refuses), only another delivery or a settlement
# can pay it, and a ticket marked delivered allows neither.
_PAID_OR_NOT_APPROVED = (TicketRow.status != TicketStatus.APPROVED.value) | exists().where(
    PayoutRow.ticket_id == TicketRow.id)
_THESE_UNDELIVERED = TicketRow.id.in_(bindparam("ids", expanding=True)), TicketRow.delivered_at.is_(None)
_MARK_DELIVERED = (
    update(TicketRow).where(*_THESE_UNDELIVERED, _PAID_OR_NOT_APPROVED)
    .values(delivered_at=bindparam("now"), delivery_error=None)
    .returning(TicketRow.id)
)
UNPAID = ("it was sent, but the agent's run ended without paying it (it did not call reimburse for the approved "
          "amount, or reimburse refused the call), so it counts as not delivered; nothing was paid")
_MARK_UNPAID = (
    update(TicketRow).where(*_THESE_UNDELIVERED, TicketRow.settled_at.is_(None), ~_PAID_OR_NOT_APPROVED)
    .values(delivery_error=UNPAID)
    .returning(TicketRow.id)
)


def count_undelivered_in() -> Select[int]:
    """How many decisions have not reached their conversation (counted in their partial index)."""
    return select(func.count()).select_from(TicketRow).where(undelivered())


class Deliveries:
    def __init__(self, database: Database, tickets: Tickets) -> None:
        self.database = database
        self.tickets = tickets

    async def undelivered(
        self, conversation: Conversation | None = None, *, limit: int | None = None, offset: int = 0
    ) -> list[Ticket]:
        async with await self.database.session() as db:
            return [Ticket.of(row) for row in await db.scalars(undelivered_in(conversation, limit, offset))]

    async def count_undelivered(self) -> int:
        async with await self.database.session() as db:
            return int(await db.scalar(count_undelivered_in()) or 0)

    async def open_in(self, conversation: Conversation) -> list[Ticket]:
        """Tickets that still need this conversation: pending, or decided and not yet delivered."""
        async with self.database.transaction() as db:
            return await self.read_open_in(conversation)(db)

    def read_open_in(self, conversation: Conversation) -> Callable[[AsyncConnection], Awaitable[list[Ticket]]]:
        """`open_in` as a read to make in a transaction of one's own (e.g. the one that takes a lock)."""
        rules = self.tickets.rules

        async def read(db: AsyncConnection) -> list[Ticket]:
            rows = await db.execute(_OPEN_IN, conversation_params(conversation))
            return [rules.recount(Ticket.of(row)) for row in rows]

        return read

    async def settle(self, ticket_id: str, *, approver: str) -> tuple[Ticket, Payout | None]:
        """Finish a decision whose delivery failed (`delivery_error`): pay an approved one, close the rest."""
        with self.database.watch.step("ledger.settle", ticket=ticket_id) as step:
            ticket, payout = await self._settle(ticket_id, approver=approver)
            step.about(session=ticket.session_id)
            if payout is not None:
                step.note(amount=payout.amount, purpose=payout.purpose, paid=True)
            return ticket, payout

    async def _settle(self, ticket_id: str, *, approver: str) -> tuple[Ticket, Payout | None]:
        approver = inputs.approver(approver, self.tickets.approvers)
        ticket = await self.tickets.get(ticket_id)
        undeliverable = ticket.delivery_error and not (ticket.delivered_at or ticket.settled_at)
        if ticket.status is TicketStatus.PENDING or not undeliverable:
            raise NotSettleable(ticket)
        now = self.database.now()
        payout = None
        try:
            async with self.database.transaction() as db:
                settled = (await db.execute(
                    update(TicketRow)
                    .where(TicketRow.id == ticket_id, TicketRow.settled_at.is_(None), TicketRow.delivered_at.is_(None))
                    .values(settled_by=approver, settled_at=now)
                    .returning(*TICKET_COLUMNS)
                )).first()
                if settled is None:
                    # Read in this transaction: on SQLite the engine's one connection is this one.
                    raise NotSettleable(Ticket.of(await row_of(db, ticket_id)))
                if ticket.status is TicketStatus.APPROVED:
                    # The approval is the authority; the payout is still one per ticket.
                    payout = await pay_ticket(db, ticket, ticket.conversation, f"settled:{ticket.id}", now,
                                              actor=approver, note=", without the conversation")
                await chain.write(db, ticket.id, at=now, actor=approver, action="settled",
                                  detail=f"the conversation could not be told: {ticket.delivery_error}")
        except IntegrityError:
            raise NotSettleable(await self.tickets.get(ticket_id)) from None  # paid meanwhile
        return Ticket.of(settled), payout

    async def failures(self, ticket_ids: list[str]) -> dict[str, datetime]:
        """When the latest failed delivery of each of these tickets was recorded (tickets with none are left out)."""
        if not ticket_ids:
            return {}
        async with await self.database.session() as db:
            rows = await db.execute(
                select(AuditRow.ticket_id, func.max(AuditRow.at))
                .where(AuditRow.ticket_id.in_(ticket_ids), AuditRow.action == "undelivered")
                .group_by(AuditRow.ticket_id)
            )
            return {ticket_id: at.replace(tzinfo=at.tzinfo or UTC) for ticket_id, at in rows.all() if at is not None}

    async def mark_delivered(self, ticket_id: str, *, actor: str) -> bool:
        """Record that the run delivering the decision has ended; False if it was delivered before, or is unpaid."""
        async with self.database.transaction() as db:
            return bool(await self.record_delivered(db, [ticket_id], actor))

    async def record_delivered(self, db: AsyncConnection, ticket_ids: Sequence[str], actor: str) -> list[str]:
        """Mark these decisions delivered in `db`'s transaction, as the run delivering them ends; returns those not
        marked before. An approval the run did not pay is recorded as a failed delivery instead (`UNPAID`), so that
        delivering it again or settling it pays it."""
        now, ids = self.database.now(), list(ticket_ids)
        marked = list(await db.scalars(_MARK_DELIVERED, {"ids": ids, "now": now}))
        for ticket_id in marked:
            await chain.write(db, ticket_id, at=now, actor=actor, action="delivered",
                              detail="the decision reached the conversation")
        rest = [ticket_id for ticket_id in ids if ticket_id not in marked]  # a ticket just marked is not unpaid
        unpaid = list(await db.scalars(_MARK_UNPAID, {"ids": rest})) if rest else []
        for ticket_id in unpaid:
            logger.warning("Ticket %s: %s (the conversation shows what the agent did)", ticket_id, UNPAID)
            with self.database.watch.step("ledger.undelivered", ticket=ticket_id) as step:
                await chain.write(db, ticket_id, at=now, actor=actor, action="undelivered", detail=UNPAID)
                step.note(delivery_failed=True)
        return marked

    async def mark_undelivered(self, ticket_id: str, *, actor: str, error: str) -> None:
        """Record why a delivery did not happen, so people can see it and act (never the SQL of a database error)."""
        error = (without_sql(error) or "unknown")[:inputs.MAX_REASON]  # what `delivery_error` holds
        with self.database.watch.step("ledger.undelivered", ticket=ticket_id) as step:
            async with self.database.transaction() as db:
                await db.execute(
                    update(TicketRow).where(TicketRow.id == ticket_id, TicketRow.delivered_at.is_(None))
                    .values(delivery_error=error)
                )
                await chain.write(db, ticket_id, at=self.database.now(), actor=actor, action="undelivered",
                                  detail=error)
            step.note(delivery_failed=True)
