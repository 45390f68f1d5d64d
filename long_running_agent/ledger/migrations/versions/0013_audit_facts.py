"""The audit chain states what was requested and what was paid: an audit row may hold `facts`, which its hash covers.

A ticket's "requested" row states the columns it was opened with, a "paid" row its payout's columns, and a payout
made without approval gets a chain of its own, keyed by its payout id (ledger/audit/chain.py). So that `expenses audit
verify` can compare every ticket and payout with its chain, this upgrade states them as it finds them: one row
(action "upgraded") at the end of each ticket's chain, with its ticket's columns and its payout's, and for each payout
made without approval, its chain's first row. Like 0010, it vouches for what it finds: anchor right after upgrading.
"""

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"

ACTOR, ACTION = "migration 0013", "upgraded"
# ledger/audit/chain.py's STATED, as of this revision.
TICKET_COLUMNS = ("id", "app_name", "user_id", "session_id", "call_id", "purpose", "amount_cents", "created_at",
                  "expires_at", "approvals_needed", "need", "tier", "policy_version", "combined_cents")
PAYOUT_COLUMNS = ("id", "ticket_id", "app_name", "call_id", "user_id", "session_id", "purpose", "amount_cents",
                  "paid_at")
_TYPES: dict[str, Any] = {"amount_cents": sa.Integer, "approvals_needed": sa.Integer, "tier": sa.Integer,
          "combined_cents": sa.BigInteger, "created_at": sa.DateTime(timezone=True),
          "expires_at": sa.DateTime(timezone=True), "paid_at": sa.DateTime(timezone=True)}
TICKETS = sa.table("approval_tickets", *(sa.column(c, _TYPES.get(c, sa.String)) for c in TICKET_COLUMNS),
                   sa.column("audit_seq", sa.Integer), sa.column("audit_head", sa.String))
PAYOUTS = sa.table("approval_payouts", *(sa.column(c, _TYPES.get(c, sa.String)) for c in PAYOUT_COLUMNS))
AUDIT = sa.table("approval_audit", sa.column("id", sa.Integer), sa.column("ticket_id", sa.String),
                 sa.column("at", sa.DateTime(timezone=True)), sa.column("actor", sa.String),
                 sa.column("action", sa.String), sa.column("detail", sa.String), sa.column("facts", sa.Text),
                 sa.column("seq", sa.Integer), sa.column("hash", sa.String))


def _time(at: datetime) -> str:
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _facts(rows: dict[str, tuple[Any, tuple[str, ...]]]) -> str:
    """ledger/audit/chain.py's `facts`, as of this revision."""
    return json.dumps({table: {c: _time(v) if isinstance(v, datetime) else v for c in columns
                               for v in [getattr(row, c)]} for table, (row, columns) in rows.items()},
                      sort_keys=True, separators=(",", ":"))


def _row(key: str, seq: int, previous: str, at: datetime, detail: str, facts: str) -> dict[str, Any]:
    """An audit row stating `facts`, chained after `previous` (ledger/audit/chain.py's `content`, encoding 2)."""
    body = json.dumps({"v": 2, "ticket": key, "at": _time(at), "actor": ACTOR, "action": ACTION, "detail": detail,
                       "facts": facts}, sort_keys=True, separators=(",", ":"))
    return {"ticket_id": key, "at": at, "actor": ACTOR, "action": ACTION, "detail": detail, "facts": facts,
            "seq": seq, "hash": hashlib.sha256((previous + body).encode("ascii")).hexdigest()}


def upgrade() -> None:
    op.add_column("approval_audit", sa.Column("facts", sa.Text))
    db, now = op.get_bind(), datetime.now(UTC)
    rows = []
    paid = {p.ticket_id: p for p in db.execute(sa.select(PAYOUTS).where(PAYOUTS.c.ticket_id.is_not(None)))}
    for ticket in db.execute(sa.select(TICKETS).order_by(TICKETS.c.id)):
        stated: dict[str, tuple[Any, tuple[str, ...]]] = {"approval_tickets": (ticket, TICKET_COLUMNS)}
        if ticket.id in paid:
            stated["approval_payouts"] = (paid[ticket.id], PAYOUT_COLUMNS)
        rows.append(_row(ticket.id, ticket.audit_seq + 1, ticket.audit_head, now,
                         "its ticket and payout as the upgrade to revision 0013 found them", _facts(stated)))
    for payout in db.execute(sa.select(PAYOUTS).where(PAYOUTS.c.ticket_id.is_(None)).order_by(PAYOUTS.c.id)):
        rows.append(_row(payout.id, 1, "", now, "paid without approval; as the upgrade to revision 0013 found it",
                         _facts({"approval_payouts": (payout, PAYOUT_COLUMNS)})))
    if rows:
        # Migration 0010's trigger moves each ticket's head to its new row.
        db.execute(AUDIT.insert(), rows)


def downgrade() -> None:
    """Back to chains without facts: the rows this revision and its code added go, and every chain is hashed again
    as 0010 hashes it (an anchor taken since no longer matches)."""
    db = op.get_bind()
    db.execute(AUDIT.delete().where((AUDIT.c.action == ACTION) & (AUDIT.c.actor == ACTOR)))
    db.execute(AUDIT.delete().where(sa.exists().where(PAYOUTS.c.id == AUDIT.c.ticket_id)))
    op.drop_column("approval_audit", "facts")  # ALTER TABLE on SQLite too: a rebuilt table would lose its trigger
    heads: dict[str, tuple[int, str]] = {}
    chained = []
    for row in db.execute(sa.select(AUDIT.c.id, AUDIT.c.ticket_id, AUDIT.c.at, AUDIT.c.actor, AUDIT.c.action,
                                    AUDIT.c.detail).order_by(AUDIT.c.ticket_id, AUDIT.c.seq)):
        seq, previous = heads.get(row.ticket_id, (0, ""))
        body = json.dumps({"v": 1, "ticket": row.ticket_id, "at": _time(row.at), "actor": row.actor,
                           "action": row.action, "detail": row.detail}, sort_keys=True, separators=(",", ":"))
        heads[row.ticket_id] = (seq + 1, hashlib.sha256((previous + body).encode("ascii")).hexdigest())
        chained.append({"row_id": row.id, "seq": seq + 1, "hash": heads[row.ticket_id][1]})
    if chained:
        db.execute(AUDIT.update().where(AUDIT.c.id == sa.bindparam("row_id"))
                   .values(seq=sa.bindparam("seq"), hash=sa.bindparam("hash")), chained)
        db.execute(TICKETS.update().where(TICKETS.c.id == sa.bindparam("ticket"))
                   .values(audit_seq=sa.bindparam("seq"), audit_head=sa.bindparam("hash")),
                   [{"ticket": ticket, "seq": seq, "hash": digest} for ticket, (seq, digest) in heads.items()])
