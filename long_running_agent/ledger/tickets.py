"""Tickets: opened by `ask_for_approval`, decided once by an approver, expired by the clock.

Every move out of pending is a conditional UPDATE (`WHERE status = 'pending'`),
so of two approvers racing in two processes exactly one wins; each move is
written to the audit trail in the same transaction.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import Select, func, select, update
from sqlalchemy.engine import CursorResult

from . import inputs
from .base import LedgerBase, new_id
from .errors import AlreadyDecided, NotAllowed, NotRequester, TicketExpired, TicketNotFound
from .policy import approved_cents, from_cents
from .records import AuditEntry, Conversation, Ticket, TicketStatus, _utc
from .schema import AuditRow, TicketRow, in_conversation


def _same_person(user_id: str, name: str) -> bool:
    try:
        return inputs.name(user_id) == name
    except inputs.InputError:
        return False


def tickets_in(status: TicketStatus, limit: int, offset: int = 0) -> Select[TicketRow]:
    """One page of the tickets in `status`, oldest first, in index order (`id` breaks ties)."""
    return (select(TicketRow).where(TicketRow.status == status)
            .order_by(TicketRow.created_at, TicketRow.id).offset(offset).limit(limit))


def count_in(status: TicketStatus) -> Select[int]:
    """How many tickets are in `status` (counted in the status index)."""
    return select(func.count()).select_from(TicketRow).where(TicketRow.status == status)


def latest_decisions(limit: int) -> Select[TicketRow]:
    """The latest decisions, newest first (read backwards along the decision index)."""
    return (select(TicketRow).where(TicketRow.decided_at.is_not(None))
            .order_by(TicketRow.decided_at.desc(), TicketRow.id.desc()).limit(limit))


class Tickets(LedgerBase):
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
            id=new_id("T"),
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            call_id=call_id,
            call_name=call_name,
            purpose=purpose,
            amount_cents=amount_cents,
            status=TicketStatus.PENDING,
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
            raise TicketNotFound(ticket_id)
        return Ticket.of(row)

    async def find_by_call(self, conversation: Conversation, call_id: str) -> Ticket | None:
        """The ticket opened by call `call_id` in this very conversation (app, user and session)."""
        async with await self.db() as db:
            row = await db.scalar(
                select(TicketRow).where(in_conversation(conversation), TicketRow.call_id == call_id)
            )
        return Ticket.of(row) if row else None

    async def list_tickets(
        self, status: TicketStatus = TicketStatus.PENDING, limit: int = 50, offset: int = 0
    ) -> list[Ticket]:
        """One page of the tickets in `status`, oldest first, in index order (`id` breaks ties)."""
        async with await self.db() as db:
            return [Ticket.of(row) for row in await db.scalars(tickets_in(status, limit, offset))]

    async def recent_decisions(self, limit: int = 20) -> list[Ticket]:
        """The latest decisions, newest first."""
        async with await self.db() as db:
            return [Ticket.of(row) for row in await db.scalars(latest_decisions(limit))]

    async def count(self, status: TicketStatus = TicketStatus.PENDING) -> int:
        """How many tickets are in `status` (counted in the status index)."""
        async with await self.db() as db:
            return int(await db.scalar(count_in(status)) or 0)

    async def decide(
        self,
        ticket_id: str,
        *,
        approver: str,
        approve: bool,
        reason: str | None = None,
        amount: object = None,
        from_chat: bool = False,
    ) -> Ticket:
        """Record an approver's decision; the ledger is written before any delivery.

        `amount` approves less than was asked (with a reason); `reimburse` then
        pays that and no more. Raises InputError for a malformed name, reason
        or amount (the same rules on every surface). `from_chat` is
        DEV_CHAT_APPROVAL: the requester decides in the chat, and the trail says so.
        """
        approver = inputs.name(approver, "approver name")
        ticket = await self.get(ticket_id)
        if ticket.status is not TicketStatus.PENDING:
            raise AlreadyDecided(ticket)
        lowered = None
        if amount is not None:
            if not approve:
                raise inputs.InputError("amount", "An amount goes with an approval; a rejection pays nothing.")
            lowered = approved_cents(amount, ticket.amount_cents)
            lowered = None if lowered == ticket.amount_cents else lowered
        reason = inputs.reason(reason, required=not approve or lowered is not None,
                               needed_by="Approving less than was asked" if approve else "A rejection")
        # One spelling per person: Alice, alice and " alice" are the same requester.
        if _same_person(ticket.user_id, approver) and not from_chat:
            raise NotAllowed(ticket_id, approver)
        if from_chat:
            approver = f"{approver} (chat, DEV_CHAT_APPROVAL)"
        if ticket.expires_at <= self._clock():
            raise TicketExpired(await self.expire(ticket_id))
        status = TicketStatus.APPROVED if approve else TicketStatus.REJECTED
        detail = reason
        if lowered is not None:
            detail = f"${from_cents(lowered):,} of the {ticket.amount_text} asked: {reason}"
        return await self._transition(ticket_id, status, actor=approver, reason=reason,
                                      approved_cents=lowered, detail=detail)

    async def expire(self, ticket_id: str) -> Ticket:
        return await self._transition(ticket_id, TicketStatus.EXPIRED, actor="system", reason="approval window ended")

    async def cancel(self, ticket_id: str, *, requester: str) -> Ticket:
        """The requester withdraws a pending request: it is never decided, and nothing is paid."""
        requester = inputs.name(requester, "requester")
        ticket = await self.get(ticket_id)
        if not _same_person(ticket.user_id, requester):
            raise NotRequester(ticket_id, requester)
        if ticket.status is not TicketStatus.PENDING:
            raise AlreadyDecided(ticket)
        if ticket.expires_at <= self._clock():
            raise TicketExpired(await self.expire(ticket_id))
        return await self._transition(ticket_id, TicketStatus.CANCELLED, actor=requester, reason=None,
                                      detail="withdrawn by the requester")

    async def expire_due(self, conversation: Conversation | None = None) -> list[str]:
        """Expire every pending ticket whose window has ended; returns their ids."""
        now = self._clock()
        query = select(TicketRow.id).where(TicketRow.status == TicketStatus.PENDING, TicketRow.expires_at <= now)
        if conversation is not None:
            query = query.where(in_conversation(conversation))
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
        self, ticket_id: str, status: TicketStatus, *, actor: str, reason: str | None,
        approved_cents: int | None = None, detail: str | None = None,
    ) -> Ticket:
        now = self._clock()
        async with await self.db() as db, db.begin():
            changed: CursorResult[Any] = await db.execute(  # type: ignore[assignment]
                update(TicketRow)
                .where(TicketRow.id == ticket_id, TicketRow.status == TicketStatus.PENDING)
                .values(status=status, decided_by=actor, decided_at=now, reason=reason,
                        approved_cents=approved_cents)
            )
            if changed.rowcount != 1:
                current = await db.get(TicketRow, ticket_id)
                if current is None:
                    raise TicketNotFound(ticket_id)
                raise AlreadyDecided(Ticket.of(current))
            db.add(AuditRow(ticket_id=ticket_id, at=now, actor=actor, action=status,
                            detail=(detail or reason or '')[:500] or None))
        return await self.get(ticket_id)

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
