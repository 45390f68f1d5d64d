"""The ledger as release 0.1 made it: tickets, payouts and the audit trail.

Release 0.1 created these tables itself (`create_all`); a database it made is
at this revision, and `expenses migrate` marks it so before upgrading."""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    # Exactly as 0.1 made them, constraints named as PostgreSQL names them
    # by default, so that the next revision meets the same tables whichever
    # way they came to be.
    op.create_table(
        "approval_tickets",
        sa.Column("id", sa.String(40)),
        sa.Column("app_name", sa.String(128), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("call_id", sa.String(128), nullable=False),
        sa.Column("call_name", sa.String(128), nullable=False),
        sa.Column("purpose", sa.String(300), nullable=False),
        sa.Column("amount_cents", sa.Integer, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_by", sa.String(128)),
        sa.Column("decided_at", sa.DateTime(timezone=True)),
        sa.Column("reason", sa.String(500)),
        sa.Column("resumed_at", sa.DateTime(timezone=True)),
        sa.Column("delivered_at", sa.DateTime(timezone=True)),
        sa.PrimaryKeyConstraint("id", name="approval_tickets_pkey"),
        sa.UniqueConstraint("session_id", "call_id", name="approval_tickets_session_id_call_id_key"),
    )
    op.create_index("ix_approval_tickets_status_created", "approval_tickets", ["status", "created_at"])
    op.create_index("ix_approval_tickets_session_id", "approval_tickets", ["session_id"])
    op.create_table(
        "approval_payouts",
        sa.Column("id", sa.String(40)),
        sa.Column("ticket_id", sa.String(40)),
        sa.Column("call_id", sa.String(128), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("purpose", sa.String(300), nullable=False),
        sa.Column("amount_cents", sa.Integer, nullable=False),
        sa.Column("paid_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="approval_payouts_pkey"),
        sa.ForeignKeyConstraint(["ticket_id"], ["approval_tickets.id"], name="approval_payouts_ticket_id_fkey"),
        sa.UniqueConstraint("ticket_id", name="approval_payouts_ticket_id_key"),
        sa.UniqueConstraint("session_id", "call_id", name="approval_payouts_session_id_call_id_key"),
    )
    op.create_index("ix_approval_payouts_session_id", "approval_payouts", ["session_id"])
    op.create_table(
        "approval_audit",
        sa.Column("id", sa.Integer, autoincrement=True),
        sa.Column("ticket_id", sa.String(40), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("detail", sa.String(500)),
        sa.PrimaryKeyConstraint("id", name="approval_audit_pkey"),
    )
    op.create_index("ix_approval_audit_ticket_id", "approval_audit", ["ticket_id"])


def downgrade() -> None:
    op.drop_table("approval_audit")
    op.drop_table("approval_payouts")
    op.drop_table("approval_tickets")
