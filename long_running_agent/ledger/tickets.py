"""Tickets: opened by `ask_for_approval`, decided once by an approver, expired by the clock.

Every move out of pending, and the first of two approvals, is one conditional UPDATE, audited and notified in the
same transaction: of approvers racing in two processes exactly one wins (docs/delivery.md: two approvers).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, NoReturn

from sqlalchemy import Select, bindparam, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from ..refusals.rules import AlreadyDecided, NotInGroup, NotRequester, TicketExpired, TicketNotFound
from ..refusals.values import APPROVE_LESS, InputError
from . import inputs, reminders
from .audit import chain
from .audit.evidence import Via
from .inputs import approved_cents, from_cents, requester_of
from .need import EVERYONE, need_text, need_words
from .outbox import Outbox
from .policy import approving, request_totals
from .policy.rules import DEFAULT_RULES, Rules
from .records import AuditEntry, Conversation, Ticket, TicketStatus, _utc
from .storage.database import Database, new_id
from .storage.schema import TICKET_COLUMNS, AuditRow, PendingCountRow, TicketRow, in_conversation

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


def _move_statement(status: TicketStatus) -> Any:
    """Move a pending ticket to `status` (before it expires, unless that is the move) and return its row."""
    within = [*approving.PENDING] if status is TicketStatus.EXPIRED else [*approving.PENDING, approving.BEFORE_EXPIRY]
    return (update(TicketRow).where(*within)
            .values(status=status.value, decided_by=bindparam("actor"), decided_at=bindparam("now"),
                    reason=bindparam("reason"), approved_cents=None)  # a ticket that is not approved pays nothing
            .returning(*TICKET_COLUMNS))


# Every move out of pending but an approval (policy/approving.py).
_MOVE: dict[TicketStatus, Any] = {status: _move_statement(status) for status in EVENT_OF
                                  if status is not TicketStatus.APPROVED}


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

    def __init__(self, database: Database, outbox: Outbox, *, rules: Rules | None = None) -> None:
        """`rules`: who approves what (policy/rules.py); its members are the only names that may decide, if set."""
        self.database = database
        self.outbox = outbox
        self.rules = rules or DEFAULT_RULES
        self.approvers = frozenset(self.rules.members) if self.rules.members is not None else None

    async def open(
        self, *, app_name: str, user_id: str, session_id: str, call_id: str, call_name: str, purpose: str,
        amount_cents: int, ttl: timedelta, session_store: str = "app", note: str | None = None,
        message_id: str | None = None, rules: Rules | None = None,
    ) -> Ticket:
        """Open a pending ticket under the policy tier the requester's total chooses (`rules`, else the ledger's);
        `note` (why it needs approval) goes into its audit trail."""
        now, rules = self.database.now(), rules or self.rules
        groups = request_totals.groups_of(message_id)
        async with self.database.transaction() as db:
            combined = await request_totals.add(db, user_id, now.astimezone(UTC).date(), groups, amount_cents)
            number, tier = rules.tier_for(combined)
            raised = number > rules.tier_for(amount_cents)[0]  # the total, not the amount, chose the tier
            ticket_id = new_id("T")
            values = {
                "id": ticket_id, "app_name": app_name, "user_id": user_id, "session_id": session_id,
                "call_id": call_id, "call_name": call_name, "purpose": purpose, "amount_cents": amount_cents,
                "status": TicketStatus.PENDING.value, "created_at": now, "expires_at": now + ttl,
                "session_store": session_store, "approvals_needed": tier.size, "need": need_text(tier.need),
                "tier": number, "policy_version": rules.version, "request_groups": "\n".join(groups),
                "combined_cents": combined if raised else None,
            }
            await db.execute(_OPEN, values)
            detail = f"${from_cents(amount_cents):,} for {purpose}" + (f" (needs approval: {note})" if note else "")
            needs = f"needs {need_words(tier.need)}"
            if raised:
                detail += (f" ({needs}: ${from_cents(combined):,} with the requester's other "
                           "requests and payouts today, or in the same message)")
            elif tier.need != ((EVERYONE, 1),):
                detail += f" ({needs})"
            await chain.write(db, ticket_id, at=now, actor=user_id, action="requested", detail=detail,
                              facts={TicketRow.__tablename__: values})
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
            return self.rules.recount(Ticket.of(await row_of(db, ticket_id)))

    async def find_by_call(self, conversation: Conversation, call_id: str) -> Ticket | None:
        """The ticket opened by call `call_id` in this very conversation (app, user and session)."""
        async with await self.database.session() as db:
            row = await db.scalar(select(TicketRow).where(in_conversation(conversation), TicketRow.call_id == call_id))
        return self.rules.recount(Ticket.of(row)) if row else None

    async def with_status(
        self, status: TicketStatus = TicketStatus.PENDING, limit: int = 50, offset: int = 0
    ) -> list[Ticket]:
        async with await self.database.session() as db:
            return [self.rules.recount(Ticket.of(row)) for row in await db.scalars(tickets_in(status, limit, offset))]

    async def recent_decisions(self, limit: int = 20) -> list[Ticket]:
        async with await self.database.session() as db:
            return [Ticket.of(row) for row in await db.scalars(latest_decisions(limit))]

    async def count(self, status: TicketStatus = TicketStatus.PENDING) -> int:
        async with await self.database.session() as db:
            return int(await db.scalar(count_in(status)) or 0)

    async def decide(
        self, ticket_id: str, *, approver: str, approve: bool, reason: str | None = None, amount: object = None,
        from_chat: bool = False, then: Then | None = None, via: Via | None = None,
    ) -> Ticket:
        """Record an approver's decision with its evidence (`via`); the ledger is written before any delivery.

        `amount` approves at most what was asked (with a reason when less; with several approvers the smallest).
        `from_chat` is DEV_CHAT_APPROVAL: the requester decides, and the trail says so. `then` runs once it is decided.
        """
        who = inputs.name(approver, "approver name") if from_chat else inputs.approver(approver, self.approvers)
        via, now = via or Via(principal={"approver": who}), self.database.now()
        async with self.database.transaction() as db:
            ticket = Ticket.of(await row_of(db, ticket_id))
            if ticket.status is not TicketStatus.PENDING:
                raise AlreadyDecided(ticket)
            approving.check_shown(ticket, via)
            cents = None
            if amount is not None:
                if not approve:
                    raise InputError("amount", "An amount goes with an approval; a rejection pays nothing.",
                                     next_step=APPROVE_LESS)
                cents = approved_cents(amount, ticket.amount_cents)
            lowered = cents if cents is not None and cents < ticket.amount_cents else None
            reason = inputs.reason(reason, required=not approve or lowered is not None,
                                   needed_by="Approving less than was asked" if approve else "A rejection")
            values = {"t_id": ticket_id, "now": now, "who": who, "reason": reason, "cents": cents, "lowered": lowered,
                      "actor": f"{who} (chat, DEV_CHAT_APPROVAL)" if from_chat else who}
            detail = approving.lowered_detail(lowered, ticket, reason)
            if approve:
                approval = await approving.approve(db, self.rules, ticket, values, detail, from_chat=from_chat,
                                                   read=lambda db: self._current(db, ticket_id))
                moved = approval.ticket if approval else None
                if approval is not None:
                    await self._recorded(db, approval.ticket, values, approval.action, approval.event, approval.detail)
            else:
                if not approving.eligible(self.rules, ticket, who, from_chat=from_chat):
                    raise NotInGroup(self.rules.recount(ticket), who, self.rules.groups_of(who), counts=False)
                moved = await self._move(db, _MOVE[TicketStatus.REJECTED], values, "rejected",
                                         EVENT_OF[TicketStatus.REJECTED], detail)
            if moved is not None:
                await approving.record(db, moved, values, via, now)
                if moved.status is not TicketStatus.PENDING and then is not None:
                    await then(db, moved)
            current = moved or await self._current(db, ticket_id)
        if moved is None:
            await self._refuse(self.rules.recount(current), who, cents, now)
        return current

    @staticmethod
    async def _current(db: AsyncConnection, ticket_id: str) -> Ticket:
        return Ticket.of(await row_of(db, ticket_id))

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
        await self._recorded(db, ticket, values, action, event, detail)
        return ticket

    async def _recorded(self, db: AsyncConnection, ticket: Ticket, values: dict[str, Any], action: str, event: str,
                        detail: str | None) -> None:
        """Audit and notify a move just made."""
        await chain.write(db, ticket.id, at=values["now"], actor=values["actor"], action=action, detail=detail)
        await self.outbox.add(db, event, ticket, values["now"])

    async def _refuse(self, current: Ticket, actor: str, cents: int | None, now: datetime) -> NoReturn:
        """Raise what stopped a move out of pending, read after its statement matched nothing."""
        if current.status is not TicketStatus.PENDING:
            raise AlreadyDecided(current)
        if current.expires_at <= now:
            raise TicketExpired(await self.expire(current.id))
        if cents is not None and cents > current.payable_cents:
            raise InputError(
                "amount",
                f"${from_cents(cents):,} is more than the {current.payable_text} {', '.join(current.approvers)} "
                "approved; approve that amount or less, or reject the ticket.", next_step=APPROVE_LESS,
            )
        raise AlreadyDecided(current)

    async def remind_due(self, remind_before: timedelta, escalate_to: tuple[str, ...] = ()) -> list[Ticket]:
        """Remind (once) of each pending ticket that expires within `remind_before`; escalate it too (reminders.py)."""
        return await reminders.remind_due(self.database, self.outbox, remind_before, escalate_to, rules=self.rules)

    async def record_refusal(self, ticket_id: str, *, actor: str, detail: str) -> None:
        async with self.database.transaction() as db:
            await chain.write(db, ticket_id, at=self.database.now(), actor=actor, action="refused", detail=detail)

    async def audit(self, ticket_id: str) -> list[AuditEntry]:
        async with await self.database.session() as db:
            rows = await db.scalars(select(AuditRow).where(AuditRow.ticket_id == ticket_id).order_by(AuditRow.id))
            return [AuditEntry(_utc(r.at), r.actor, r.action, r.detail) for r in rows]  # type: ignore[arg-type]
