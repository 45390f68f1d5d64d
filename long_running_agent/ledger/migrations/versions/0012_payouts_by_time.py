"""Payouts by time: the metrics' "paid today" reads a range of `paid_at` along an index, not the whole table."""

from alembic import op

revision = "0012"
down_revision = "0011"


def upgrade() -> None:
    op.create_index("ix_approval_payouts_paid_at", "approval_payouts", ["paid_at"])


def downgrade() -> None:
    op.drop_index("ix_approval_payouts_paid_at", table_name="approval_payouts")
