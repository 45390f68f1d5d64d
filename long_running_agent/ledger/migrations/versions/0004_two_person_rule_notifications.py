"""The two-person rule, reminders and escalation, and the notifications outbox."""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"

DUE = sa.text("sent_at IS NULL AND failed_at IS NULL")


def upgrade() -> None:
    # Every ticket so far needed one approval.
    op.add_column("approval_tickets", sa.Column("approvals_needed", sa.Integer, nullable=False, server_default="1"))
    op.add_column("approval_tickets", sa.Column("first_approved_by", sa.String(128)))
    op.add_column("approval_tickets", sa.Column("first_approved_at", sa.DateTime(timezone=True)))
    op.add_column("approval_tickets", sa.Column("reminded_at", sa.DateTime(timezone=True)))
    op.add_column("approval_tickets", sa.Column("escalated_to", sa.String(300)))
    op.create_table(
        "notifications",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("ticket_id", sa.String(40), nullable=False),
        sa.Column("event", sa.String(40), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("sent_at", sa.DateTime(timezone=True)),
        sa.Column("failed_at", sa.DateTime(timezone=True)),
        sa.Column("last_error", sa.String(500)),
        sa.Column("claimed_by", sa.String(200)),
        sa.Column("claimed_until", sa.DateTime(timezone=True)),
        sa.PrimaryKeyConstraint("id", name="pk_notifications"),
    )
    op.create_index("ix_notifications_ticket_id", "notifications", ["ticket_id"])
    op.create_index("ix_notifications_due", "notifications", ["next_attempt_at"],
                    sqlite_where=DUE, postgresql_where=DUE)


def downgrade() -> None:
    op.drop_table("notifications")
    with op.batch_alter_table("approval_tickets") as table:
        for column in ("escalated_to", "reminded_at", "first_approved_at", "first_approved_by", "approvals_needed"):
            table.drop_column(column)
