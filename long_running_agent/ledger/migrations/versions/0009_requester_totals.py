"""The two-person rule counts all a requester asked for or was paid that day, whatever the purposes say.

The purpose totals give way to one total per requester and day: each open or approved ticket's amount, and what was
paid without approval, added up; each ticket then counts in that group and its message's, a message's total kept
whatever the day (under MESSAGE_DAY). Approvers see the requester's day beside each ticket, read along a new
index."""

from datetime import UTC, date, datetime

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"

TICKETS = sa.table("approval_tickets", sa.column("id", sa.String), sa.column("user_id", sa.String),
                   sa.column("amount_cents", sa.Integer), sa.column("status", sa.String),
                   sa.column("created_at", sa.DateTime(timezone=True)), sa.column("request_groups", sa.String))
TOTALS = sa.table("request_totals", sa.column("requester", sa.String), sa.column("day", sa.Date),
                  sa.column("request_group", sa.String), sa.column("total_cents", sa.BigInteger))
PAID = sa.table("daily_auto_approvals", sa.column("requester", sa.String), sa.column("day", sa.Date),
                sa.column("total_cents", sa.Integer))


MESSAGE_DAY = date(1970, 1, 1)  # request_totals.MESSAGE_DAY, as of this revision


def _day(at: datetime) -> object:
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(UTC).date()


def _totals(db: sa.Connection, *, message_day: date | None) -> None:
    """Rebuild the message totals from the open and approved tickets: under `message_day`, or each ticket's day."""
    totals: dict[tuple[str, object, str], int] = {}
    for ticket in db.execute(sa.select(TICKETS).where(TICKETS.c.status.in_(["pending", "approved"]))):
        for group in (g for g in (ticket.request_groups or "").splitlines() if g.startswith("message:")):
            key = (ticket.user_id.strip().casefold(), message_day or _day(ticket.created_at), group)
            totals[key] = totals.get(key, 0) + ticket.amount_cents
    db.execute(TOTALS.delete().where(TOTALS.c.request_group.like("message:%")))
    if totals:
        db.execute(TOTALS.insert(), [{"requester": requester, "day": day, "request_group": group, "total_cents": cents}
                                     for (requester, day, group), cents in totals.items()])


def upgrade() -> None:
    op.create_index("ix_approval_tickets_user_created", "approval_tickets", ["user_id", "created_at"])
    db = op.get_bind()
    totals: dict[tuple[str, object], int] = {}
    for requester, day, cents in db.execute(sa.select(PAID.c.requester, PAID.c.day, PAID.c.total_cents)):
        totals[requester, day] = totals.get((requester, day), 0) + cents
    for ticket in db.execute(sa.select(TICKETS)):
        groups = [g for g in (ticket.request_groups or "").splitlines() if not g.startswith("purpose:")]
        db.execute(TICKETS.update().where(TICKETS.c.id == ticket.id)
                   .values(request_groups="\n".join(["requester", *groups])))
        if ticket.status in ("pending", "approved"):
            key = (ticket.user_id.strip().casefold(), _day(ticket.created_at))
            totals[key] = totals.get(key, 0) + ticket.amount_cents
    db.execute(TOTALS.delete().where(TOTALS.c.request_group.like("purpose:%")))
    if totals:
        db.execute(TOTALS.insert(), [{"requester": requester, "day": day, "request_group": "requester",
                                      "total_cents": cents} for (requester, day), cents in totals.items()])
    _totals(db, message_day=MESSAGE_DAY)


def downgrade() -> None:
    op.drop_index("ix_approval_tickets_user_created", "approval_tickets")
    db = op.get_bind()
    db.execute(TOTALS.delete().where(TOTALS.c.request_group == "requester"))
    for ticket in db.execute(sa.select(TICKETS.c.id, TICKETS.c.request_groups)):
        groups = [g for g in (ticket.request_groups or "").splitlines() if g != "requester"]
        db.execute(TICKETS.update().where(TICKETS.c.id == ticket.id).values(request_groups="\n".join(groups)))
    _totals(db, message_day=None)
