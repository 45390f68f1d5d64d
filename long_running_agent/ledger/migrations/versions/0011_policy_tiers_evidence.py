"""Approval policy as data: each ticket keeps its tier's need and who counted for it; each decision, its evidence.

Tickets opened before keep their rule: their need is N approvals from `approvers` (the group everyone is in), and a
first approval already given counts for it. Decisions made before have no evidence rows: their audit trail says
who decided.
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"

TICKETS = sa.table("approval_tickets", sa.column("id", sa.String), sa.column("approvals_needed", sa.Integer),
                   sa.column("need", sa.String), sa.column("first_approved_by", sa.String),
                   sa.column("decided_by", sa.String), sa.column("counted", sa.String), sa.column("status", sa.String))


def upgrade() -> None:
    # Plain ADD COLUMNs: a rebuilt table would lose migration 0007's triggers.
    for column in (sa.Column("need", sa.String(300)), sa.Column("tier", sa.Integer),
                   sa.Column("policy_version", sa.String(16)), sa.Column("counted", sa.String(1000))):
        op.add_column("approval_tickets", column)
    op.execute(TICKETS.update().values(need=sa.literal("approvers=") + sa.cast(TICKETS.c.approvals_needed, sa.String)))
    # Who approved so far, as ledger/need.py writes it ("bob=approvers", a line each).
    approved = op.get_bind().execute(
        sa.select(TICKETS.c.id, TICKETS.c.first_approved_by, TICKETS.c.decided_by, TICKETS.c.status)
        .where(TICKETS.c.status.in_(("pending", "approved")))
        .where(TICKETS.c.first_approved_by.is_not(None) | (TICKETS.c.status == "approved"))).all()
    for ticket_id, first, last, status in approved:
        names = dict.fromkeys(n for n in (first, last if status == "approved" else None) if n)
        op.execute(TICKETS.update().where(TICKETS.c.id == ticket_id)
                   .values(counted="\n".join(f"{name}=approvers" for name in names)))
    op.create_table(
        "approval_decisions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("ticket_id", sa.String(40), nullable=False),
        sa.Column("approver", sa.String(200), nullable=False),
        sa.Column("approve", sa.Boolean, nullable=False),
        sa.Column("counted_as", sa.String(128)),
        sa.Column("cents", sa.BigInteger),
        sa.Column("channel", sa.String(16), nullable=False),
        sa.Column("principal", sa.String(500), nullable=False),
        sa.Column("shown", sa.String(64), nullable=False),
        sa.Column("reason", sa.String(500)),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_approval_decisions"),
    )
    op.create_index("ix_approval_decisions_ticket_id", "approval_decisions", ["ticket_id"])
    op.create_index("uq_approval_decisions_approval", "approval_decisions", ["ticket_id", "approver"], unique=True,
                    sqlite_where=sa.text("approve"), postgresql_where=sa.text("approve"))


def downgrade() -> None:
    op.drop_table("approval_decisions")
    for column in ("counted", "policy_version", "tier", "need"):
        op.drop_column("approval_tickets", column)
