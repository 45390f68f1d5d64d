"""The two-person rule's running totals, so that splitting a request does not dodge the rule.

Opening a ticket raises its groups' totals and reads them back in one upsert, so of several requests racing, the one
that crosses DUAL_APPROVAL_ABOVE needs two approvers (docs/security.md: split requests).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from .policy import purpose_key, requester_of
from .records import Ticket, TicketStatus, _utc
from .schema import RequestTotalRow, TicketRow

# The upsert, by (PostgreSQL?, number of groups); its values are bound at execution.
_ADD: dict[tuple[bool, int], Any] = {}


def groups_of(purpose: str, message_id: str | None) -> list[str]:
    """The request groups a ticket counts in: its purpose, and its message when ADK names one."""
    return [f"purpose:{purpose_key(purpose)}"] + ([f"message:{message_id}"] if message_id else [])


async def add(db: AsyncConnection, user_id: str, day: date, groups: list[str], cents: int) -> int:
    """`total += cents` in each group of the requester's day, in one upsert; returns the largest new total."""
    key = (db.dialect.name == "postgresql", len(groups))
    if key not in _ADD:
        upsert = postgresql_insert if key[0] else sqlite_insert
        statement = upsert(RequestTotalRow).values([
            {"requester": bindparam("requester"), "day": bindparam("day"),
             "request_group": bindparam(f"group_{n}"), "total_cents": bindparam("cents")}
            for n in range(len(groups))
        ])
        _ADD[key] = statement.on_conflict_do_update(
            index_elements=[RequestTotalRow.requester, RequestTotalRow.day, RequestTotalRow.request_group],
            set_={"total_cents": RequestTotalRow.total_cents + statement.excluded.total_cents},
        ).returning(RequestTotalRow.total_cents)
    totals = await db.scalars(_ADD[key], {"requester": requester_of(user_id), "day": day, "cents": cents,
                                          **{f"group_{n}": group for n, group in enumerate(groups)}})
    return max(int(total) for total in totals)


async def take_back(db: AsyncConnection, row: Any) -> None:
    """Take a ticket that will never pay (its row) out of its groups' totals."""
    day = _utc(row.created_at).astimezone(UTC).date()  # type: ignore[union-attr]
    for group in (row.request_groups or "").splitlines():
        await db.execute(
            update(RequestTotalRow)
            .where(RequestTotalRow.requester == requester_of(row.user_id), RequestTotalRow.day == day,
                   RequestTotalRow.request_group == group)
            .values(total_cents=RequestTotalRow.total_cents - row.amount_cents)
        )


async def combined_with(db: AsyncSession, ticket: Ticket) -> list[Ticket]:
    """The requester's other open or approved tickets that count toward `ticket`'s totals (same group, same day)."""
    mine = await db.scalar(select(TicketRow.request_groups).where(TicketRow.id == ticket.id))
    groups = set((mine or "").splitlines())
    start = datetime.combine(ticket.created_at.astimezone(UTC).date(), time(), tzinfo=UTC)
    rows = await db.scalars(
        select(TicketRow).where(
            TicketRow.user_id == ticket.user_id, TicketRow.id != ticket.id,
            TicketRow.created_at >= start, TicketRow.created_at < start + timedelta(days=1),
            TicketRow.status.in_([TicketStatus.PENDING, TicketStatus.APPROVED]),
        ).order_by(TicketRow.created_at, TicketRow.id)
    )
    return [Ticket.of(r) for r in rows if groups & set((r.request_groups or "").splitlines())]
