"""Split requests add up toward the two-person rule: one total per requester, day and group."""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    op.create_table(
        "request_totals",
        sa.Column("requester", sa.String(128), nullable=False),
        sa.Column("day", sa.Date, nullable=False),
        sa.Column("request_group", sa.String(400), nullable=False),
        sa.Column("total_cents", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("requester", "day", "request_group", name="pk_request_totals"),
    )
    # Tickets opened before this revision belong to no group: nothing to take back from a total.
    op.add_column("approval_tickets", sa.Column("request_groups", sa.String(1000)))
    op.add_column("approval_tickets", sa.Column("combined_cents", sa.BigInteger))


def downgrade() -> None:
    with op.batch_alter_table("approval_tickets") as table:
        table.drop_column("combined_cents")
        table.drop_column("request_groups")
    op.drop_table("request_totals")
