"""Tickets: opened by `ask_for_approval`, decided once by an approver, expired by the clock.

Every move out of pending is a conditional UPDATE (`WHERE status = 'pending'`),
so of two approvers racing in two processes exactly one wins; each move is
written to the audit trail, and its notification to the outbox (outbox.py),
in the same transaction.

Above DUAL_APPROVAL_ABOVE a ticket needs two approvals from two approvers.
The first is a conditional UPDATE too (`WHERE first_approved_by IS NULL`),
and the second decides (`WHERE first_approved_by != <this approver>`): two
approvers racing, or one approving twice, still end in one decision.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime, time, timedelta
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Select, bindparam, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncConnection

from ..refusals.rules import (
    AlreadyApprovedByYou,
    AlreadyDecided,
    NotAllowed,
    NotAnApprover,
    NotRequester,
    TicketExpired,
    TicketNotFound,
)
from ..refusals.values import APPROVE_LESS, InputError
from . import inputs
from .database import Database, new_id
from .outbox import Outbox
from .policy import approved_cents, from_cents, purpose_key, requester_of
from .records import AuditEntry, Conversation, Ticket, TicketStatus, _utc
from .schema import AUDIT, TICKET_COLUMNS, AuditRow, PendingCountRow, RequestTotalRow, TicketRow, in_conversation


def approver_name(raw: object, approvers: frozenset[str] | None) -> str:
    """`raw` as a canonical name that may decide: one of `approvers` (APPROVERS), when they are set."""
    name = inputs.name(raw, "approver name")
    if approvers is not None and name not in approvers:
        raise NotAnApprover(name, sorted(approvers))
    return name


# Run inside the transaction that decides a ticket, once it is decided (e.g. take its conversation).
Then = Callable[[AsyncConnection, Ticket], Awaitable[None]]

# The statements of a flow's steps, built once; their values are bound at execution (database.py).
_OPEN = insert(TicketRow)
_ROW = select(*TICKET_COLUMNS).where(TicketRow.id == bindparam("t_id"))


def _move_statement(*, before_expiry: bool, one_approver: bool = False) -> Any:
    """Move a pending ticket (before it expires, unless it is the expiry; only one needing one approver) and
    return its row."""
    within = [TicketRow.id == bindparam("t_id"), TicketRow.status == TicketStatus.PENDING]
    if before_expiry:
        within.append(TicketRow.expires_at > bindparam("t_now"))
    if one_approver:
        within.append(TicketRow.approvals_needed == 1)
    return (update(TicketRow).where(*within)
            .values(status=bindparam("status"), decided_by=bindparam("decided_by"),
                    decided_at=bindparam("decided_at"), reason=bindparam("reason"),
                    approved_cents=bindparam("approved_cents"))
            .returning(*TICKET_COLUMNS))


# By (before its expiry?, only a ticket that needs one approver?).
_MOVE = {(before, one): _move_statement(before_expiry=before, one_approver=one)
         for before in (True, False) for one in (True, False) if before or not one}
# By (PostgreSQL?, number of request groups).
_ADD_TO_TOTALS: dict[tuple[bool, int], Any] = {}


async def row_of(db: Any, ticket_id: str) -> Any:
    """The ticket's row as this transaction sees it now (a Core row: no ORM object to build)."""
    row = (await db.execute(_ROW, {"t_id": ticket_id})).first()
    if row is None:
        raise TicketNotFound(ticket_id)
    return row


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
    """How many tickets are in `status`: pending ones from their count (PendingCountRow), others in the status index.

    The pending count is kept by the database as tickets change, so reading it
    costs the same with ten tickets waiting or a million.
    """
    if status is TicketStatus.PENDING:
        return select(func.coalesce(func.sum(PendingCountRow.pending), 0))
    return select(func.count()).select_from(TicketRow).where(TicketRow.status == status)


def latest_decisions(limit: int) -> Select[TicketRow]:
    """The latest decisions, newest first (read backwards along the decision index)."""
    return (select(TicketRow).where(TicketRow.decided_at.is_not(None))
            .order_by(TicketRow.decided_at.desc(), TicketRow.id.desc()).limit(limit))


# The notification each move out of pending sends.
EVENT_OF = {
    TicketStatus.APPROVED: "ticket.approved", TicketStatus.REJECTED: "ticket.rejected",
    TicketStatus.EXPIRED: "ticket.expired", TicketStatus.WITHDRAWN: "ticket.withdrawn",
}


class Tickets:
    """Every ticket's life: opened, decided once (by one or two approvers), withdrawn, expired, reminded."""

    def __init__(self, database: Database, outbox: Outbox, *, approvers: frozenset[str] | None = None) -> None:
        """`approvers`: the only names that may decide a ticket (APPROVERS), in their canonical form;
        None lets any name but the requester's decide."""
        self.database = database
        self.outbox = outbox
        self.approvers = approvers

    async def open(
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
        message_id: str | None = None,
        dual_above_cents: int | None = None,
    ) -> Ticket:
        """Open a pending ticket; `note` (why it needs approval) goes into its audit trail.

        The two-person rule: the ticket needs two approvers when its amount,
        added to the requester's other open or approved requests today (UTC)
        for the same purpose, or from the same message (`message_id`, ADK's
        invocation id), comes to more than `dual_above_cents`. The totals are
        raised and read in one statement each, in this transaction, so of
        several requests racing, the one that crosses the line is the one
        that needs two approvers.
        """
        now = self.database.now()
        requester = requester_of(user_id)
        day = now.astimezone(UTC).date()
        groups = [f"purpose:{purpose_key(purpose)}"] + ([f"message:{message_id}"] if message_id else [])
        async with self.database.transaction() as db:
            totals = await db.scalars(*self._add_to_totals(requester, day, groups, amount_cents))
            combined = max(int(total) for total in totals)
            dual = dual_above_cents is not None and combined > dual_above_cents
            values = {
                "id": new_id("T"), "app_name": app_name, "user_id": user_id, "session_id": session_id,
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
                           "requests for the same purpose today, or in the same message)")
            elif dual:
                detail += " (needs 2 approvers)"
            await db.execute(AUDIT, {"ticket_id": values["id"], "at": now, "actor": user_id, "action": "requested",
                                     "detail": detail[:500]})
            ticket = Ticket.of(SimpleNamespace(**(dict.fromkeys(c.name for c in TICKET_COLUMNS) | values)))
            await self.outbox.add(db, "ticket.requested", ticket, now)
        return ticket

    def _add_to_totals(self, requester: str, day: date, groups: list[str], cents: int) -> Any:
        """`total += cents` for (requester, day, group) of each group, returning the new totals: one upsert."""
        key = (self.database.is_postgresql, len(groups))
        if key not in _ADD_TO_TOTALS:
            upsert = postgresql_insert if self.database.is_postgresql else sqlite_insert
            statement = upsert(RequestTotalRow).values([
                {"requester": bindparam("requester"), "day": bindparam("day"),
                 "request_group": bindparam(f"group_{n}"), "total_cents": bindparam("cents")}
                for n in range(len(groups))
            ])
            _ADD_TO_TOTALS[key] = statement.on_conflict_do_update(
                index_elements=[RequestTotalRow.requester, RequestTotalRow.day, RequestTotalRow.request_group],
                set_={"total_cents": RequestTotalRow.total_cents + statement.excluded.total_cents},
            ).returning(RequestTotalRow.total_cents)
        return _ADD_TO_TOTALS[key], {"requester": requester, "day": day, "cents": cents,
                                     **{f"group_{n}": group for n, group in enumerate(groups)}}

    async def combined_with(self, ticket: Ticket) -> list[Ticket]:
        """The other open or approved tickets that count toward `ticket`'s totals (same groups, same day)."""
        if ticket.combined_cents is None:
            return []
        async with await self.database.session() as db:
            row = await row_of(db, ticket.id)
            groups = set((row.request_groups or "").splitlines())
            day = ticket.created_at.astimezone(UTC).date()
            start = datetime.combine(day, time(), tzinfo=UTC)
            rows = await db.scalars(
                select(TicketRow).where(
                    TicketRow.user_id == ticket.user_id, TicketRow.id != ticket.id,
                    TicketRow.created_at >= start, TicketRow.created_at < start + timedelta(days=1),
                    TicketRow.status.in_([TicketStatus.PENDING, TicketStatus.APPROVED]),
                ).order_by(TicketRow.created_at, TicketRow.id)
            )
            return [Ticket.of(r) for r in rows if groups & set((r.request_groups or "").splitlines())]

    async def get(self, ticket_id: str) -> Ticket:
        async with await self.database.session() as db:
            row = await db.get(TicketRow, ticket_id)
        if row is None:
            raise TicketNotFound(ticket_id)
        return Ticket.of(row)

    async def find_by_call(self, conversation: Conversation, call_id: str) -> Ticket | None:
        """The ticket opened by call `call_id` in this very conversation (app, user and session)."""
        async with await self.database.session() as db:
            row = await db.scalar(
                select(TicketRow).where(in_conversation(conversation), TicketRow.call_id == call_id)
            )
        return Ticket.of(row) if row else None

    async def with_status(
        self, status: TicketStatus = TicketStatus.PENDING, limit: int = 50, offset: int = 0
    ) -> list[Ticket]:
        """One page of the tickets in `status`, oldest first, in index order (`id` breaks ties)."""
        async with await self.database.session() as db:
            return [Ticket.of(row) for row in await db.scalars(tickets_in(status, limit, offset))]

    async def recent_decisions(self, limit: int = 20) -> list[Ticket]:
        """The latest decisions, newest first."""
        async with await self.database.session() as db:
            return [Ticket.of(row) for row in await db.scalars(latest_decisions(limit))]

    async def count(self, status: TicketStatus = TicketStatus.PENDING) -> int:
        """How many tickets are in `status` (counted in the status index)."""
        async with await self.database.session() as db:
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
        then: Then | None = None,
    ) -> Ticket:
        """Record an approver's decision; the ledger is written before any delivery.

        `amount` approves that much, at most what was asked (with a reason
        when less); `reimburse` then pays it and no more. Under the two-person
        rule the payout is at most the smaller of the two approvers' amounts:
        each approval's statement carries its amount in its WHERE clause, so
        one can never raise what another approved, however they race. Raises
        InputError for a malformed name, reason or amount (the same rules on
        every surface). `from_chat` is DEV_CHAT_APPROVAL: the requester
        decides in the chat, and the trail says so. `then` runs in the
        deciding transaction once the ticket is decided.
        """
        # DEV_CHAT_APPROVAL: whoever chats decides, named as such in the trail.
        approver = inputs.name(approver, "approver name") if from_chat else approver_name(approver, self.approvers)
        now = self.database.now()
        # One transaction: the ticket read, checked, decided, audited (and `then`), in one go.
        async with self.database.transaction() as db:
            moved = await self._decide_at_once(db, ticket_id, approver, approve, reason, amount, from_chat, now)
            if moved is not None:
                if then is not None:
                    await then(db, moved)
                return moved
            ticket = Ticket.of(await row_of(db, ticket_id))
            if ticket.status is not TicketStatus.PENDING:
                raise AlreadyDecided(ticket)
            cents = None
            if amount is not None:
                if not approve:
                    raise InputError("amount", "An amount goes with an approval; a rejection pays nothing.",
                                     next_step=APPROVE_LESS)
                cents = approved_cents(amount, ticket.amount_cents)
            lowered = cents is not None and cents < ticket.amount_cents
            reason = inputs.reason(reason, required=not approve or lowered,
                                   needed_by="Approving less than was asked" if approve else "A rejection")
            # One spelling per person: Alice, alice and " alice" are the same requester.
            if _same_person(ticket.user_id, approver) and not (from_chat and not ticket.needs_two_approvers):
                raise NotAllowed(ticket_id, approver)
            if from_chat:
                approver = f"{approver} (chat, DEV_CHAT_APPROVAL)"
            detail = reason
            if lowered:
                detail = f"${from_cents(cents or 0):,} of the {ticket.amount_text} asked: {reason}"
            two = approve and ticket.needs_two_approvers
            if not two:
                status = TicketStatus.APPROVED if approve else TicketStatus.REJECTED
                moved, current = await self._move(db, ticket_id, status, now, actor=approver, reason=reason,
                                                  approved_cents=cents if lowered else None, detail=detail)
                if moved is not None and then is not None:
                    await then(db, moved)
        if two:
            return await self._approve_as_one_of_two(ticket, approver, reason, cents, detail, then)
        if moved is not None:
            return moved
        assert current is not None  # read by _move when it moved nothing
        await self._why_not_decided(current, approver, None, now)
        raise AssertionError("unreachable")  # _why_not_decided always raises

    async def _decide_at_once(
        self, db: AsyncConnection, ticket_id: str, approver: str, approve: bool, reason: str | None,
        amount: object, from_chat: bool, now: datetime,
    ) -> Ticket | None:
        """The usual decision (one approver, the amount asked) as one UPDATE ... RETURNING; None if it is not that.

        The ticket comes back from the statement that decides it; a requester
        deciding their own ticket is found then, and refused, which rolls the
        whole transaction back. Anything else (an amount, two approvers, a
        ticket decided or expired, a missing reason) is left to `decide`'s
        reading of the ticket first, which refuses it in the same order as ever.
        """
        if amount is not None or from_chat:
            return None
        try:
            reason = inputs.reason(reason, required=not approve,
                                   needed_by="Approving less than was asked" if approve else "A rejection")
        except InputError:
            return None

        def not_the_requester(ticket: Ticket) -> None:
            if _same_person(ticket.user_id, approver):
                raise NotAllowed(ticket_id, approver)

        moved, _current = await self._move(
            db, ticket_id, TicketStatus.APPROVED if approve else TicketStatus.REJECTED, now, actor=approver,
            reason=reason, detail=reason, one_approver=True, check=not_the_requester)
        return moved

    async def _approve_as_one_of_two(
        self, ticket: Ticket, approver: str, reason: str | None, cents: int | None, detail: str | None,
        then: Then | None = None,
    ) -> Ticket:
        """The first approval leaves the ticket waiting; the second, by someone else, decides it.

        Each is one conditional UPDATE. An approval with an amount holds only
        while no one approved less (`COALESCE(approved_cents, amount_cents) >=
        amount`), and sets it, so `approved_cents` is always the smallest
        amount approved; an approval without one keeps what the other set.
        """
        now = self.database.now()
        within = [TicketRow.id == ticket.id, TicketRow.status == TicketStatus.PENDING, TicketRow.expires_at > now]
        if cents is not None:
            within.append(func.coalesce(TicketRow.approved_cents, TicketRow.amount_cents) >= cents)
        amount = {"approved_cents": cents} if cents is not None and cents < ticket.amount_cents else {}
        async with self.database.transaction() as db:
            first: CursorResult[Any] = await db.execute(
                update(TicketRow).where(*within, TicketRow.first_approved_by.is_(None))
                .values(first_approved_by=approver, first_approved_at=now, **amount)
            )
            if first.rowcount == 1:
                waiting = Ticket.of(await row_of(db, ticket.id))
                await db.execute(AUDIT, {"ticket_id": ticket.id, "at": now, "actor": approver, "action": "approval",
                                         "detail": (f"1 of 2: {detail}" if detail else "1 of 2")[:500]})
                await self.outbox.add(db, "ticket.first_approval", waiting, now)
                return waiting
        # The first approval is in (given just now by someone else, maybe): this is the second.
        async with self.database.transaction() as db:
            second: CursorResult[Any] = await db.execute(
                update(TicketRow)
                .where(*within, TicketRow.first_approved_by.is_not(None), TicketRow.first_approved_by != approver)
                .values(status=TicketStatus.APPROVED, decided_by=approver, decided_at=now, reason=reason, **amount)
            )
            current = Ticket.of(await row_of(db, ticket.id))
            if second.rowcount == 1:
                await db.execute(AUDIT, {"ticket_id": ticket.id, "at": now, "actor": approver,
                                         "action": TicketStatus.APPROVED.value,
                                         "detail": (f"2 of 2: {detail}" if detail else "2 of 2")[:500]})
                await self.outbox.add(db, EVENT_OF[TicketStatus.APPROVED], current, now)
                if then is not None:
                    await then(db, current)
                return current
        await self._why_not_decided(current, approver, cents, now)
        raise AssertionError("unreachable")  # _why_not_decided always raises

    async def _why_not_decided(self, current: Ticket, approver: str, cents: int | None, now: datetime) -> None:
        """Raise what stopped a conditional decision, read after the statement decided nothing."""
        if current.status is not TicketStatus.PENDING:
            raise AlreadyDecided(current)
        if current.expires_at <= now:
            raise TicketExpired(await self.expire(current.id))
        if current.first_approved_by == approver:
            raise AlreadyApprovedByYou(current)
        if cents is not None and cents > current.payable_cents:
            raise InputError(
                "amount",
                f"${from_cents(cents):,} is more than the {current.payable_text} {current.first_approved_by} "
                "approved; approve that amount or less, or reject the ticket.", next_step=APPROVE_LESS,
            )
        raise AlreadyDecided(current)

    async def expire(self, ticket_id: str) -> Ticket:
        return await self._transition(ticket_id, TicketStatus.EXPIRED, actor="system", reason="approval window ended")

    async def withdraw(self, ticket_id: str, *, requester: str) -> Ticket:
        """The requester withdraws a pending request: it is never decided, and nothing is paid."""
        requester = inputs.name(requester, "requester")
        ticket = await self.get(ticket_id)
        if not _same_person(ticket.user_id, requester):
            raise NotRequester(ticket_id, requester)
        if ticket.status is not TicketStatus.PENDING:
            raise AlreadyDecided(ticket)
        return await self._transition(ticket_id, TicketStatus.WITHDRAWN, actor=requester, reason=None,
                                      detail="withdrawn by the requester")

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
        now = self.database.now()
        async with self.database.transaction() as db:
            moved, current = await self._move(db, ticket_id, status, now, actor=actor, reason=reason,
                                              approved_cents=approved_cents, detail=detail)
        if moved is not None:
            return moved
        assert current is not None  # read by _move when it moved nothing
        await self._why_not_decided(current, actor, None, now)
        raise AssertionError("unreachable")

    async def _move(
        self, db: AsyncConnection, ticket_id: str, status: TicketStatus, now: datetime, *, actor: str,
        reason: str | None, approved_cents: int | None = None, detail: str | None = None,
        one_approver: bool = False, check: Callable[[Ticket], None] | None = None,
    ) -> tuple[Ticket | None, Ticket | None]:
        """Move a pending ticket to `status` in `db`'s transaction: (the moved ticket, it) or (None, as it is).

        One conditional UPDATE ... RETURNING: the decision and the row it
        leaves come back together.
        """
        row = (await db.execute(_MOVE[status is not TicketStatus.EXPIRED, one_approver], {
            "t_id": ticket_id, "t_now": now, "status": status.value, "decided_by": actor, "decided_at": now,
            "reason": reason, "approved_cents": approved_cents,
        })).first()
        if row is None:
            # Read now only to say why (`one_approver`'s caller reads the ticket itself).
            return None, None if one_approver else Ticket.of(await row_of(db, ticket_id))
        ticket = Ticket.of(row)
        if check is not None:
            check(ticket)
        if status is not TicketStatus.APPROVED:
            await self._take_back(db, row)
        await db.execute(AUDIT, {"ticket_id": ticket_id, "at": now, "actor": actor, "action": status.value,
                                 "detail": (detail or reason or '')[:500] or None})
        await self.outbox.add(db, EVENT_OF[status], ticket, now)
        return ticket, ticket

    async def _take_back(self, db: Any, row: Any) -> None:
        """A ticket that will never pay no longer counts toward its groups' totals."""
        day = _utc(row.created_at).astimezone(UTC).date()  # type: ignore[union-attr]
        for group in (row.request_groups or "").splitlines():
            await db.execute(
                update(RequestTotalRow)
                .where(RequestTotalRow.requester == requester_of(row.user_id), RequestTotalRow.day == day,
                       RequestTotalRow.request_group == group)
                .values(total_cents=RequestTotalRow.total_cents - row.amount_cents)
            )

    async def remind_due(self, remind_before: timedelta, escalate_to: tuple[str, ...] = ()) -> list[Ticket]:
        """Remind (once) of each pending ticket that expires within `remind_before`; escalate it too.

        A conditional UPDATE marks each reminded, so of several replicas
        sweeping at once one sends each reminder, and a restart sends none twice.
        """
        now = self.database.now()
        async with await self.database.session() as db:
            due = list(await db.scalars(
                select(TicketRow.id).where(TicketRow.status == TicketStatus.PENDING,
                                           TicketRow.expires_at > now, TicketRow.expires_at <= now + remind_before,
                                           TicketRow.reminded_at.is_(None))
            ))
        reminded = []
        for ticket_id in due:
            async with await self.database.session() as db, db.begin():
                changed: CursorResult[Any] = await db.execute(  # type: ignore[assignment]
                    update(TicketRow)
                    .where(TicketRow.id == ticket_id, TicketRow.status == TicketStatus.PENDING,
                           TicketRow.reminded_at.is_(None))
                    .values(reminded_at=now, escalated_to=",".join(escalate_to) or None)
                )
                if changed.rowcount != 1:
                    continue
                ticket = Ticket.of(await row_of(db, ticket_id))
                db.add(AuditRow(ticket_id=ticket_id, at=now, actor="system", action="reminded",
                                detail=f"it expires at {ticket.expires_at:%Y-%m-%d %H:%M} UTC"))
                await self.outbox.add(db, "ticket.reminder", ticket, now)
                if escalate_to:
                    db.add(AuditRow(ticket_id=ticket_id, at=now, actor="system", action="escalated",
                                    detail=f"to {', '.join(escalate_to)}"))
                    await self.outbox.add(db, "ticket.escalated", ticket, now)
            reminded.append(ticket)
        return reminded

    async def record_refusal(self, ticket_id: str, *, actor: str, detail: str) -> None:
        async with await self.database.session() as db, db.begin():
            db.add(AuditRow(ticket_id=ticket_id, at=self.database.now(), actor=actor,
                            action="refused", detail=detail[:500]))

    async def audit(self, ticket_id: str) -> list[AuditEntry]:
        async with await self.database.session() as db:
            rows = await db.scalars(
                select(AuditRow).where(AuditRow.ticket_id == ticket_id).order_by(AuditRow.id)
            )
            return [AuditEntry(_utc(r.at), r.actor, r.action, r.detail) for r in rows]  # type: ignore[arg-type]
