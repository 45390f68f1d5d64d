"""Approve with changes: the amount an approver approved, when it is less than was asked."""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    # NULL for every ticket so far: each was approved (if at all) for what was asked.
    op.add_column("approval_tickets", sa.Column("approved_cents", sa.Integer))


def downgrade() -> None:
    with op.batch_alter_table("approval_tickets") as table:
        table.drop_column("approved_cents")
