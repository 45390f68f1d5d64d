"""An approver's decision on a ticket, accepted or refused by one conditional UPDATE and recorded with its evidence.

An approval is judged against who has approved so far (the ticket's `counted`, rules.py) and holds only if that is
still so when it is written: its UPDATE is conditional on `counted`, on the ticket being pending and unexpired, and on
no one having approved less (`PINNED`). Of approvers racing in two processes or replicas, the loser is judged again
against the winner's approval; none counts twice, and the ticket is approved only with its whole need met
(docs/policy.md). A rejection by any approver the tier could count rejects it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Integer, bindparam, func, update
from sqlalchemy.ext.asyncio import AsyncConnection

from ...refusals.rules import AlreadyApprovedByYou, NotAllowed, NotAsShown, NotInGroup
from ..audit import evidence
from ..inputs import from_cents, requester_of
from ..need import counted_text, progress_text
from ..records import Ticket, TicketStatus
from ..storage.schema import TICKET_COLUMNS, TicketRow
from .rules import Rules, counted

PENDING = (TicketRow.id == bindparam("t_id"), TicketRow.status == TicketStatus.PENDING)
BEFORE_EXPIRY = TicketRow.expires_at > bindparam("now")
# An approval with an amount holds only while no one approved less, and sets it when it is less than was
# asked, so `approved_cents` is always the smallest amount approved; one without (`cents` NULL) keeps it.
_CENTS = bindparam("cents", type_=Integer)
PINNED = _CENTS.is_(None) | (func.coalesce(TicketRow.approved_cents, TicketRow.amount_cents) >= _CENTS)
_JUDGED = func.coalesce(TicketRow.counted, "") == bindparam("seen")

_APPROVAL = (
    update(TicketRow).where(*PENDING, BEFORE_EXPIRY, PINNED, _JUDGED)
    .values(counted=bindparam("counted"),
            first_approved_by=func.coalesce(TicketRow.first_approved_by, bindparam("actor")),
            first_approved_at=func.coalesce(TicketRow.first_approved_at, bindparam("now")),
            approved_cents=func.coalesce(bindparam("lowered", type_=Integer), TicketRow.approved_cents))
    .returning(*TICKET_COLUMNS)
)
# The approval that completes the need decides the ticket.
_QUORUM = _APPROVAL.values(status=TicketStatus.APPROVED.value, decided_by=bindparam("actor"),
                           decided_at=bindparam("now"), reason=bindparam("reason"))

# How many times an approval is judged again after another approval landed first.
_ROUNDS = 8


def eligible(rules: Rules, ticket: Ticket, approver: str, *, from_chat: bool = False) -> frozenset[str]:
    """The groups of the ticket's need `approver` may count for: their own, their own request only where allowed."""
    if from_chat:  # DEV_CHAT_APPROVAL: the requester, where one approval decides
        if ticket.approvals_needed > 1:
            raise NotAllowed(ticket.id, approver)
        return frozenset(group for group, _ in ticket.needed)
    groups = rules.eligible(ticket, approver)
    if requester_of(ticket.user_id) == approver and not groups:
        raise NotAllowed(ticket.id, approver)
    return groups


def judged(rules: Rules, ticket: Ticket, approver: str, groups: frozenset[str]) -> dict[str, str]:
    """Every approval once `approver` approves, each with the group it counts for ("" for none): the approvals
    given are matched again with each approver's groups now, and the new one must add a place, or it is refused."""
    now = rules.recount(ticket)
    if approver in now.approvals:
        raise AlreadyApprovedByYou(now, approver)
    if not groups:
        raise NotInGroup(now, approver, rules.groups_of(approver), counts=False)
    so_far = now.counted_for
    placed = counted(ticket.needed, {who: rules.eligible(ticket, who) for who in so_far} | {approver: groups})
    if approver not in placed or len(placed) <= len(so_far):
        raise NotInGroup(now, approver, groups, counts=True)
    return {who: placed.get(who, "") for who in now.approvals} | {approver: placed[approver]}


class Approval(NamedTuple):
    """An approval written: the ticket as it left it, and its audit action, notification and words."""

    ticket: Ticket
    action: str
    event: str
    detail: str | None


async def approve(
    db: AsyncConnection, rules: Rules, ticket: Ticket, values: dict[str, Any], detail: str | None, *,
    from_chat: bool, read: Callable[[AsyncConnection], Awaitable[Ticket]],
) -> Approval | None:
    """Write one approval, judged again while others land first; None if the ticket's state refuses it."""
    for _ in range(_ROUNDS):
        groups = eligible(rules, ticket, values["who"], from_chat=from_chat)
        placed = judged(rules, ticket, values["who"], groups)
        complete = sum(1 for group in placed.values() if group) == ticket.approvals_needed
        judged_against = {"seen": ticket.counted or "", "counted": counted_text(placed)}
        row = (await db.execute(_QUORUM if complete else _APPROVAL, values | judged_against)).first()
        if row is not None:
            moved = Ticket.of(row)
            # "1 of 2: needs 1 more from cfo: <reason>" where more than one approval decides.
            progress = (progress_text(moved.needed, moved.counted_for, moved.no_longer_counting)
                        if moved.needs_two_approvers else None)
            said = ": ".join(filter(None, (progress, detail))) or None
            if complete:
                return Approval(moved, "approved", "ticket.approved", said)
            first = len(moved.counted_for) == 1
            return Approval(moved, "approval", "ticket.first_approval" if first else "ticket.approval", said)
        current = await read(db)
        if current.status is not TicketStatus.PENDING or (current.counted or "") == (ticket.counted or ""):
            return None  # decided, expired or pinned: the caller says which
        ticket = current
    return None


def check_shown(ticket: Ticket, via: evidence.Via) -> None:
    """Refuse a decision made on another ticket than this one (what its surface showed has another digest)."""
    if via.shown is not None and via.shown != evidence.digest(ticket):
        raise NotAsShown(ticket.id)


async def record(db: AsyncConnection, moved: Ticket, values: dict[str, Any], via: evidence.Via,
                 at: datetime) -> None:
    """The decision's evidence, beside the move it made (no approver counts twice: a UNIQUE index says so too)."""
    await evidence.add(db, moved.id, approver=values["actor"], approve=moved.status is not TicketStatus.REJECTED,
                       counted_as=moved.counted_for.get(values["who"]) if moved.status is not TicketStatus.REJECTED
                       else None, cents=values["cents"], via=via,
                       shown=evidence.digest(moved), reason=values["reason"], at=at)


def lowered_detail(lowered: int | None, ticket: Ticket, reason: str | None) -> str | None:
    """The audit's words for a decision: its reason, and the amount approved when less than asked."""
    if lowered is not None:
        return f"${from_cents(lowered):,} of the {ticket.amount_text} asked: {reason}"
    return reason
