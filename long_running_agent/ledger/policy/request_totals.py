"""The two-person rule's running totals, so that splitting a request, however it is worded, does not dodge the rule.

Two totals per ticket: everything its requester asked approvers for or was paid without approval that UTC day,
whatever the purposes say (`REQUESTER`), and its message's requests. Opening a ticket raises them and reads them back
in one upsert, so of several requests racing, the one that crosses DUAL_APPROVAL_ABOVE needs two approvers; a
payout without approval raises the first in its own transaction (docs/security.md: split requests).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from ..inputs import from_cents, requester_of
from ..records import Ticket, TicketStatus, _utc
from ..storage.schema import DailyAutoApprovalRow, RequestTotalRow, TicketRow

# The upsert, by (PostgreSQL?, number of groups); its values are bound at execution.
_ADD: dict[tuple[bool, int], Any] = {}


# The group of every request and payout of a requester's day.
REQUESTER = "requester"
# The day a message's total is kept under: a message's calls add up whatever their day, so that two calls of
# one turn, one just before midnight UTC and one just after, still count together.
MESSAGE_DAY = date(1970, 1, 1)
# A requester's other tickets of the day that approvers see listed; the rest are counted.
SHOWN = 5


def groups_of(message_id: str | None) -> list[str]:
    """The groups a ticket counts in: its requester's day, and its message when ADK names one."""
    return [REQUESTER] + ([f"message:{message_id}"] if message_id else [])


def _day_of(group: str, day: date) -> date:
    return day if group == REQUESTER else MESSAGE_DAY


async def add(db: AsyncConnection, user_id: str, day: date, groups: list[str], cents: int) -> int:
    """`total += cents` in each group (the requester's `day`, a message's), in one upsert; the largest new total."""
    key = (db.dialect.name == "postgresql", len(groups))
    if key not in _ADD:
        upsert = postgresql_insert if key[0] else sqlite_insert
        statement = upsert(RequestTotalRow).values([
            {"requester": bindparam("requester"), "day": bindparam(f"day_{n}"),
             "request_group": bindparam(f"group_{n}"), "total_cents": bindparam("cents")}
            for n in range(len(groups))
        ])
        _ADD[key] = statement.on_conflict_do_update(
            index_elements=[RequestTotalRow.requester, RequestTotalRow.day, RequestTotalRow.request_group],
            set_={"total_cents": RequestTotalRow.total_cents + statement.excluded.total_cents},
        ).returning(RequestTotalRow.total_cents)
    totals = await db.scalars(_ADD[key], {"requester": requester_of(user_id), "cents": cents, **{
        name: value for n, group in enumerate(groups) for name, value in (
            (f"group_{n}", group), (f"day_{n}", _day_of(group, day)))}})
    return max(int(total) for total in totals)


async def total_of(db: AsyncSession, user_id: str, day: date) -> int:
    """What the requester asked approvers for or was paid without approval on `day`: the total a request adds to."""
    total = await db.scalar(select(RequestTotalRow.total_cents).where(
        RequestTotalRow.requester == requester_of(user_id), RequestTotalRow.day == day,
        RequestTotalRow.request_group == REQUESTER))
    return int(total or 0)


async def take_back(db: AsyncConnection, row: Any) -> None:
    """Take a ticket that will never pay (its row) out of its groups' totals."""
    day = _utc(row.created_at).astimezone(UTC).date()  # type: ignore[union-attr]
    for group in (row.request_groups or "").splitlines():
        await db.execute(
            update(RequestTotalRow)
            .where(RequestTotalRow.requester == requester_of(row.user_id),
                   RequestTotalRow.day == _day_of(group, day), RequestTotalRow.request_group == group)
            .values(total_cents=RequestTotalRow.total_cents - row.amount_cents)
        )


@dataclass(frozen=True)
class RequesterDay:
    """A ticket's requester's UTC day: their other requests, and what they were paid without approval.

    Every approver surface shows it beside the ticket, so that nobody approves half of a split unknowingly.
    """

    day: date
    others: list[Ticket]
    paid_without_approval_cents: int

    def total_cents(self, ticket: Ticket) -> int:
        """What the requester asked for (and may still be paid) or was paid that day, `ticket` included."""
        counted = [t for t in (ticket, *self.others) if t.status in (TicketStatus.PENDING, TicketStatus.APPROVED)]
        return sum(t.amount_cents for t in counted) + self.paid_without_approval_cents

    def as_json(self, ticket: Ticket) -> dict[str, Any]:
        """The API's, the webhooks' and Slack's `requester_today`: the total, and the newest SHOWN others."""
        return {
            "day": self.day.isoformat(),
            "total": float(from_cents(self.total_cents(ticket))),
            "paid_without_approval": float(from_cents(self.paid_without_approval_cents)),
            "others": [{"id": t.id, "status": t.status.value, "amount": t.amount, "purpose": t.purpose}
                       for t in self.others[::-1][:SHOWN]],
            "others_count": len(self.others),
        }


def day_in_words(day: dict[str, Any], escape: Callable[[str], str]) -> str | None:
    """A `requester_today` in one line for people, user text through `escape`; None when there is nothing else.

    "$9,000.00 in all: T-1a2b ($4,500.00, pending) for team dinner; $40.00 paid without approval"
    """
    others = [f"{o['id']} (${o['amount']:,.2f}, {o['status']}) for {escape(o['purpose'])}" for o in day["others"]]
    if len(others) < day["others_count"]:
        others.append(f"{day['others_count'] - len(others)} more")
    if day["paid_without_approval"]:
        others.append(f"${day['paid_without_approval']:,.2f} paid without approval")
    return f"${day['total']:,.2f} in all: " + "; ".join(others) if others else None


def _day(ticket: Ticket) -> date:
    return ticket.created_at.astimezone(UTC).date()


async def requester_days(db: AsyncSession, tickets: list[Ticket]) -> dict[str, RequesterDay]:
    """Each ticket's RequesterDay, by ticket id: two reads for any number of tickets."""
    if not tickets:
        return {}
    days = {_day(t) for t in tickets}
    start = datetime.combine(min(days), time(), tzinfo=UTC)
    rows = await db.scalars(select(TicketRow).where(
        TicketRow.user_id.in_({t.user_id for t in tickets}), TicketRow.created_at >= start,
        TicketRow.created_at < datetime.combine(max(days), time(), tzinfo=UTC) + timedelta(days=1),
    ).order_by(TicketRow.created_at, TicketRow.id))
    theirs: dict[tuple[str, date], list[Ticket]] = {}
    for ticket in map(Ticket.of, rows):
        theirs.setdefault((ticket.user_id, _day(ticket)), []).append(ticket)
    paid = {(requester, day): cents for requester, day, cents in await db.execute(
        select(DailyAutoApprovalRow.requester, DailyAutoApprovalRow.day, DailyAutoApprovalRow.total_cents).where(
            DailyAutoApprovalRow.requester.in_({requester_of(t.user_id) for t in tickets}),
            DailyAutoApprovalRow.day >= min(days), DailyAutoApprovalRow.day <= max(days)))}
    return {t.id: RequesterDay(_day(t), [o for o in theirs.get((t.user_id, _day(t)), []) if o.id != t.id],
                               paid.get((requester_of(t.user_id), _day(t)), 0)) for t in tickets}
