"""The audit trail is hash-chained per ticket, and the ticket keeps its chain's head.

Each audit row gets its place in its ticket's chain (`seq`, UNIQUE with the ticket) and `hash`, sha256 of the
previous row's hash and its own content (ledger/audit/chain.py); the ticket gets the head (`audit_seq`, `audit_head`),
moved by a trigger on each row added. The rows there are now are chained here, per ticket in the order of their ids,
so an upgraded ledger verifies (`expenses audit verify`); the UNIQUE index replaces the one on `ticket_id` alone."""

import hashlib
import json
from datetime import UTC
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"

AUDIT = sa.table("approval_audit", sa.column("id", sa.Integer), sa.column("ticket_id", sa.String),
                 sa.column("at", sa.DateTime(timezone=True)), sa.column("actor", sa.String),
                 sa.column("action", sa.String), sa.column("detail", sa.String), sa.column("seq", sa.Integer),
                 sa.column("hash", sa.String))
TICKETS = sa.table("approval_tickets", sa.column("id", sa.String), sa.column("audit_seq", sa.Integer),
                   sa.column("audit_head", sa.String))

SQLITE_TRIGGER = ("CREATE TRIGGER audit_chain_head AFTER INSERT ON approval_audit "
                  "BEGIN UPDATE approval_tickets SET audit_seq = NEW.seq, audit_head = NEW.hash "
                  "WHERE id = NEW.ticket_id; END")
POSTGRESQL_FUNCTION = """
CREATE FUNCTION move_audit_head() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE approval_tickets SET audit_seq = NEW.seq, audit_head = NEW.hash WHERE id = NEW.ticket_id;
    RETURN NULL;
END $$
"""
POSTGRESQL_TRIGGER = ("CREATE TRIGGER audit_chain_head AFTER INSERT ON approval_audit "
                      "FOR EACH ROW EXECUTE FUNCTION move_audit_head()")


def _content(row: sa.Row[Any]) -> str:
    """ledger/audit/chain.py's `content`, encoding 1, as of this revision."""
    when = (row.at if row.at.tzinfo else row.at.replace(tzinfo=UTC)).astimezone(UTC)
    return json.dumps({"v": 1, "ticket": row.ticket_id, "at": when.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                       "actor": row.actor, "action": row.action, "detail": row.detail},
                      sort_keys=True, separators=(",", ":"))


def _chain(db: sa.Connection) -> None:
    """Chain the rows there are, per ticket in the order of their ids, and set each ticket's head."""
    rows: list[dict[str, object]] = []
    heads: dict[str, tuple[int, str]] = {}
    for row in db.execute(sa.select(AUDIT).order_by(AUDIT.c.ticket_id, AUDIT.c.id)):
        seq, previous = heads.get(row.ticket_id, (0, ""))
        digest = hashlib.sha256((previous + _content(row)).encode("ascii")).hexdigest()
        heads[row.ticket_id] = (seq + 1, digest)
        rows.append({"row_id": row.id, "seq": seq + 1, "hash": digest})
    if rows:
        db.execute(AUDIT.update().where(AUDIT.c.id == sa.bindparam("row_id"))
                   .values(seq=sa.bindparam("seq"), hash=sa.bindparam("hash")), rows)
        db.execute(TICKETS.update().where(TICKETS.c.id == sa.bindparam("ticket"))
                   .values(audit_seq=sa.bindparam("seq"), audit_head=sa.bindparam("hash")),
                   [{"ticket": ticket, "seq": seq, "hash": digest} for ticket, (seq, digest) in heads.items()])


def upgrade() -> None:
    op.add_column("approval_tickets", sa.Column("audit_seq", sa.Integer, nullable=False, server_default="0"))
    op.add_column("approval_tickets", sa.Column("audit_head", sa.String(64), nullable=False, server_default=""))
    op.add_column("approval_audit", sa.Column("seq", sa.Integer))
    op.add_column("approval_audit", sa.Column("hash", sa.String(64)))
    _chain(op.get_bind())
    with op.batch_alter_table("approval_audit") as table:
        table.alter_column("seq", existing_type=sa.Integer, nullable=False)
        table.alter_column("hash", existing_type=sa.String(64), nullable=False)
        table.drop_index("ix_approval_audit_ticket_id")
        table.create_unique_constraint("uq_approval_audit_ticket_id_seq", ["ticket_id", "seq"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(POSTGRESQL_FUNCTION)
        op.execute(POSTGRESQL_TRIGGER)
    else:
        op.execute(SQLITE_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER audit_chain_head ON approval_audit")
        op.execute("DROP FUNCTION move_audit_head()")
    else:
        op.execute("DROP TRIGGER audit_chain_head")
    with op.batch_alter_table("approval_audit") as table:
        table.drop_constraint("uq_approval_audit_ticket_id_seq", type_="unique")
        table.drop_column("hash")
        table.drop_column("seq")
        table.create_index("ix_approval_audit_ticket_id", ["ticket_id"])
    with op.batch_alter_table("approval_tickets") as table:
        table.drop_column("audit_head")
        table.drop_column("audit_seq")
