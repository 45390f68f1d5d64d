"""Tickets: opened by `ask_for_approval`, decided once by an approver, expired by the clock.

Every move out of pending, and the first of two approvals, is one conditional UPDATE, audited and notified in the
same transaction: of approvers racing in two processes exactly one wins (docs/security.md: two approvers).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, NoReturn

from sqlalchemy import Integer, Select, bindparam, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from ..refusals.rules import (
    AlreadyApprovedByYou,
    AlreadyDecided,
    NotAllowed,
    NotRequester,
    TicketExpired,
    TicketNotFound,
)
from ..refusals.values import APPROVE_LESS, InputError
from . import audit, inputs, reminders, request_totals
from .database import Database, new_id
from .outbox import Outbox
from .policy import approved_cents, from_cents, requester_of
from .records import AuditEntry, Conversation, Ticket, TicketStatus, _utc
from .schema import TICKET_COLUMNS, AuditRow, PendingCountRow, TicketRow, in_conversation

# Run inside the transaction that decides a ticket, once it is decided (e.g. take its conversation).
Then = Callable[[AsyncConnection, Ticket], Awaitable[None]]

# The notification each move out of pending sends.
EVENT_OF = {
    TicketStatus.APPROVED: "ticket.approved", TicketStatus.REJECTED: "ticket.rejected",
    TicketStatus.EXPIRED: "ticket.expired", TicketStatus.WITHDRAWN: "ticket.withdrawn",
}

# Built once, their values bound at execution (benchmarks/README.md).
_OPEN = insert(TicketRow)
_ROW = select(*TICKET_COLUMNS).where(TicketRow.id == bindparam("t_id"))
_PENDING = (TicketRow.id == bindparam("t_id"), TicketRow.status == TicketStatus.PENDING)
_BEFORE_EXPIRY = TicketRow.expires_at > bindparam("now")
# An approval with an amount holds only while no one approved less, and sets it when it is less than was
# asked, so `approved_cents` is always the smallest amount approved; one without (`cents` NULL) keeps it.
_CENTS = bindparam("cents", type_=Integer)
_PINNED = _CENTS.is_(None) | (func.coalesce(TicketRow.approved_cents, TicketRow.amount_cents) >= _CENTS)

_FIRST_OF_TWO = (
    update(TicketRow).where(*_PENDING, _BEFORE_EXPIRY, TicketRow.first_approved_by.is_(None), _PINNED)
    .values(first_approved_by=bindparam("actor"), first_approved_at=bindparam("now"),
            approved_cents=bindparam("lowered"))
    .returning(*TICKET_COLUMNS)
)


def _move_statement(status: TicketStatus) -> Any:
    """Move a pending ticket to `status` (before it expires, unless that is the move) and return its row."""
    within = [*_PENDING] if status is TicketStatus.EXPIRED else [*_PENDING, _BEFORE_EXPIRY]
    approved: Any = None  # a ticket that is not approved pays nothing
    if status is TicketStatus.APPROVED:
        # One approver decides, or under the two-person rule a second one, who is not the first.
        two = TicketRow.first_approved_by.is_not(None) & (TicketRow.first_approved_by != bindparam("actor"))
        within += [(TicketRow.approvals_needed == 1) | two, _PINNED]
        approved = func.coalesce(bindparam("lowered", type_=Integer), TicketRow.approved_cents)
    return (update(TicketRow).where(*within)
            .values(status=status.value, decided_by=bindparam("actor"), decided_at=bindparam("now"),
                    reason=bindparam("reason"), approved_cents=approved)
            .returning(*TICKET_COLUMNS))


_MOVE = {status: _move_statement(status) for status in EVENT_OF}


async def row_of(db: Any, ticket_id: str) -> Any:
    """The ticket's row as this transaction sees it now (a Core row: no ORM object to build)."""
    row = (await db.execute(_ROW, {"t_id": ticket_id})).first()
    if row is None:
        raise TicketNotFound(ticket_id)
    return row


def tickets_in(status: TicketStatus, limit: int, offset: int = 0) -> Select[TicketRow]:
    """One page of the tickets in `status`, oldest first, in index order (`id` breaks ties)."""
    return (select(TicketRow).where(TicketRow.status == status)
            .order_by(TicketRow.created_at, TicketRow.id).offset(offset).limit(limit))


def count_in(status: TicketStatus) -> Select[int]:
    """How many tickets are in `status`: pending ones from the count the database keeps (PendingCountRow)."""
    if status is TicketStatus.PENDING:
        return select(func.coalesce(func.sum(PendingCountRow.pending), 0))
    return select(func.count()).select_from(TicketRow).where(TicketRow.status == status)


def latest_decisions(limit: int) -> Select[TicketRow]:
    """The latest decisions, newest first (read backwards along the decision index)."""
    return (select(TicketRow).where(TicketRow.decided_at.is_not(None))
            .order_by(TicketRow.decided_at.desc(), TicketRow.id.desc()).limit(limit))


class Tickets:
    """Every ticket's life: opened, decided once (by one or two approvers), withdrawn, expired, reminded."""

    def __init__(self, database: Database, outbox: Outbox, *, approvers: frozenset[str] | None = None) -> None:
        """`approvers`: the only canonical names that may decide (APPROVERS); None lets any but the requester's."""
        self.database = database
        self.outbox = outbox
        self.approvers = approvers

    async def open(
        self, *, app_name: str, user_id: str, session_id: str, call_id: str, call_name: str, purpose: str,
        amount_cents: int, ttl: timedelta, session_store: str = "app", note: str | None = None,
        message_id: str | None = None, dual_above_cents: int | None = None,
    ) -> Ticket:
        """Open a pending ticket; `note` (why it needs approval) goes into its audit trail."""
        now = self.database.now()
        groups = request_totals.groups_of(message_id)
        async with self.database.transaction() as db:
            combined = await request_totals.add(db, user_id, now.astimezone(UTC).date(), groups, amount_cents)
            dual = dual_above_cents is not None and combined > dual_above_cents
            ticket_id = new_id("T")
            values = {
                "id": ticket_id, "app_name": app_name, "user_id": user_id, "session_id": session_id,
                "call_id": call_id, "call_name": call_name, "purpose": purpose, "amount_cents": amount_cents,
                "status": TicketStatus.PENDING.value, "created_at": now, "expires_at": now + ttl,
                "session_store": session_store, "approvals_needed": 2 if dual else 1,
                "request_groups": "\n".join(groups),
                "combined_cents": combined if dual and combined > amount_cents else None,
            }
            await db.execute(_OPEN, values)
            detail = f"${from_cents(amount_cents):,} for {purpose}" + (f" (needs approval: {note})" if note else "")
            if values["combined_cents"] is not None:
                detail += (f" (needs 2 approvers: ${from_cents(combined):,} with the requester's other "
                           "requests and payouts today, or in the same message)")
            elif dual:
                detail += " (needs 2 approvers)"
            await audit.write(db, ticket_id, at=now, actor=user_id, action="requested", detail=detail)
            ticket = Ticket.of(SimpleNamespace(**(dict.fromkeys(c.name for c in TICKET_COLUMNS) | values)))
            await self.outbox.add(db, "ticket.requested", ticket, now)
        return ticket

    async def combined_with(self, ticket: Ticket) -> list[Ticket]:
        """The requester's other open or approved tickets that day, when they made `ticket` need two approvers."""
        if ticket.combined_cents is None:
            return []
        day = (await self.requester_days([ticket]))[ticket.id]
        return [t for t in day.others if t.status in (TicketStatus.PENDING, TicketStatus.APPROVED)]

    async def requester_days(self, tickets: list[Ticket]) -> dict[str, request_totals.RequesterDay]:
        """Each ticket's requester's UTC day (request_totals.RequesterDay), by ticket id."""
        async with await self.database.session() as db:
            return await request_totals.requester_days(db, tickets)

    async def requester_today(self, ticket_id: str) -> dict[str, Any] | None:
        """A pending ticket's `requester_today` for a webhook or Slack message, as it stands; None once decided."""
        ticket = await self.get(ticket_id)
        if ticket.status is not TicketStatus.PENDING:
            return None
        return (await self.requester_days([ticket]))[ticket.id].as_json(ticket)

    async def get(self, ticket_id: str) -> Ticket:
        async with self.database.transaction() as db:
            return Ticket.of(await row_of(db, ticket_id))

    async def find_by_call(self, conversation: Conversation, call_id: str) -> Ticket | None:
        """The ticket opened by call `call_id` in this very conversation (app, user and session)."""
        async with await self.database.session() as db:
            row = await db.scalar(select(TicketRow).where(in_conversation(conversation), TicketRow.call_id == call_id))
        return Ticket.of(row) if row else None

    async def with_status(
        self, status: TicketStatus = TicketStatus.PENDING, limit: int = 50, offset: int = 0
    ) -> list[Ticket]:
        async with await self.database.session() as db:
            return [Ticket.of(row) for row in await db.scalars(tickets_in(status, limit, offset))]

    async def recent_decisions(self, limit: int = 20) -> list[Ticket]:
        async with await self.database.session() as db:
            return [Ticket.of(row) for row in await db.scalars(latest_decisions(limit))]

    async def count(self, status: TicketStatus = TicketStatus.PENDING) -> int:
        async with await self.database.session() as db:
            return int(await db.scalar(count_in(status)) or 0)

    async def decide(
        self, ticket_id: str, *, approver: str, approve: bool, reason: str | None = None, amount: object = None,
        from_chat: bool = False, then: Then | None = None,
    ) -> Ticket:
        """Record an approver's decision; the ledger is written before any delivery.

        `amount` approves at most what was asked (with a reason when less; under two approvers the smaller: `_PINNED`).
        `from_chat` is DEV_CHAT_APPROVAL: the requester decides, and the trail says so. `then` runs once it is decided.
        """
        approver = inputs.name(approver, "approver name") if from_chat else inputs.approver(approver, self.approvers)
        now = self.database.now()
        async with self.database.transaction() as db:
            ticket = Ticket.of(await row_of(db, ticket_id))
            if ticket.status is not TicketStatus.PENDING:
                raise AlreadyDecided(ticket)
            cents = None
            if amount is not None:
                if not approve:
                    raise InputError("amount", "An amount goes with an approval; a rejection pays nothing.",
                                     next_step=APPROVE_LESS)
                cents = approved_cents(amount, ticket.amount_cents)
            lowered = cents if cents is not None and cents < ticket.amount_cents else None
            reason = inputs.reason(reason, required=not approve or lowered is not None,
                                   needed_by="Approving less than was asked" if approve else "A rejection")
            # One spelling per person: Alice, alice and " alice" are the same requester.
            if requester_of(ticket.user_id) == approver and not (from_chat and not ticket.needs_two_approvers):
                raise NotAllowed(ticket_id, approver)
            if from_chat:
                approver = f"{approver} (chat, DEV_CHAT_APPROVAL)"
            detail = reason
            if lowered is not None:
                detail = f"${from_cents(lowered):,} of the {ticket.amount_text} asked: {reason}"
            values = {"t_id": ticket_id, "now": now, "actor": approver, "reason": reason, "cents": cents,
                      "lowered": lowered}
            two = approve and ticket.needs_two_approvers
            moved = None
            if two and ticket.first_approved_by is None:
                moved = await self._move(db, _FIRST_OF_TWO, values, "approval", "ticket.first_approval",
                                         f"1 of 2: {detail}" if detail else "1 of 2")
            if moved is None:
                # One approver's decision; or the second approval, maybe after a first given just now.
                status = TicketStatus.APPROVED if approve else TicketStatus.REJECTED
                if two:
                    detail = f"2 of 2: {detail}" if detail else "2 of 2"
                moved = await self._move(db, _MOVE[status], values, status.value, EVENT_OF[status], detail)
                if moved is not None and then is not None:
                    await then(db, moved)
            current = moved or Ticket.of(await row_of(db, ticket_id))
        if moved is None:
            await self._refuse(current, approver, cents, now)
        return current

    async def expire(self, ticket_id: str) -> Ticket:
        return await self._end(ticket_id, TicketStatus.EXPIRED, actor="system", reason="approval window ended")

    async def withdraw(self, ticket_id: str, *, requester: str) -> Ticket:
        """The requester withdraws a pending request: it is never decided, and nothing is paid."""
        requester = inputs.name(requester, "requester")
        ticket = await self.get(ticket_id)
        if requester_of(ticket.user_id) != requester:
            raise NotRequester(ticket_id, requester)
        if ticket.status is not TicketStatus.PENDING:
            raise AlreadyDecided(ticket)
        return await self._end(ticket_id, TicketStatus.WITHDRAWN, actor=requester, detail="withdrawn by the requester")

    async def expire_due(self, conversation: Conversation | None = None) -> list[str]:
        """Expire every pending ticket whose window has ended; returns their ids."""
        now = self.database.now()
        query = select(TicketRow.id).where(TicketRow.status == TicketStatus.PENDING, TicketRow.expires_at <= now)
        if conversation is not None:
            query = query.where(in_conversation(conversation))
        async with await self.database.session() as db:
            due = list(await db.scalars(query))
        expired = []
        for ticket_id in due:
            with contextlib.suppress(AlreadyDecided):  # decided meanwhile
                await self.expire(ticket_id)
                expired.append(ticket_id)
        return expired

    async def _end(self, ticket_id: str, status: TicketStatus, *, actor: str, reason: str | None = None,
                   detail: str | None = None) -> Ticket:
        """Move a pending ticket to `status` without an approver (it expired, or was withdrawn)."""
        now = self.database.now()
        values = {"t_id": ticket_id, "now": now, "actor": actor, "reason": reason}
        async with self.database.transaction() as db:
            moved = await self._move(db, _MOVE[status], values, status.value, EVENT_OF[status], detail or reason)
            current = moved or Ticket.of(await row_of(db, ticket_id))
        if moved is None:
            await self._refuse(current, actor, None, now)
        return current

    async def _move(
        self, db: AsyncConnection, statement: Any, values: dict[str, Any], action: str, event: str, detail: str | None
    ) -> Ticket | None:
        """Run one conditional UPDATE ... RETURNING of a pending ticket; if it matched, audit and notify it."""
        row = (await db.execute(statement, values)).first()
        if row is None:
            return None
        ticket = Ticket.of(row)
        if ticket.status not in (TicketStatus.PENDING, TicketStatus.APPROVED):
            await request_totals.take_back(db, row)
        await audit.write(db, ticket.id, at=values["now"], actor=values["actor"], action=action, detail=detail)
        await self.outbox.add(db, event, ticket, values["now"])
        return ticket

    async def _refuse(self, current: Ticket, actor: str, cents: int | None, now: datetime) -> NoReturn:
        """Raise what stopped a move out of pending, read after its statement matched nothing."""
        if current.status is not TicketStatus.PENDING:
            raise AlreadyDecided(current)
        if current.expires_at <= now:
            raise TicketExpired(await self.expire(current.id))
        if current.first_approved_by == actor:
            raise AlreadyApprovedByYou(current)
        if cents is not None and cents > current.payable_cents:
            raise InputError(
                "amount",
                f"${from_cents(cents):,} is more than the {current.payable_text} {current.first_approved_by} "
                "approved; approve that amount or less, or reject the ticket.", next_step=APPROVE_LESS,
            )
        raise AlreadyDecided(current)

    async def remind_due(self, remind_before: timedelta, escalate_to: tuple[str, ...] = ()) -> list[Ticket]:
        """Remind (once) of each pending ticket that expires within `remind_before`; escalate it too (reminders.py)."""
        return await reminders.remind_due(self.database, self.outbox, remind_before, escalate_to)

    async def record_refusal(self, ticket_id: str, *, actor: str, detail: str) -> None:
        async with self.database.transaction() as db:
            await audit.write(db, ticket_id, at=self.database.now(), actor=actor, action="refused", detail=detail)

    async def audit(self, ticket_id: str) -> list[AuditEntry]:
        async with await self.database.session() as db:
            rows = await db.scalars(select(AuditRow).where(AuditRow.ticket_id == ticket_id).order_by(AuditRow.id))
            return [AuditEntry(_utc(r.at), r.actor, r.action, r.detail) for r in rows]  # type: ignore[arg-type]
