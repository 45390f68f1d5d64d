"""Interactive Slack approvals: the requests taken in the last minutes (to refuse replays), and their decisions."""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"

UNDONE = sa.text("decision IS NOT NULL AND done_at IS NULL")


def upgrade() -> None:
    op.create_table(
        "slack_requests",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ticket_id", sa.String(40)),
        sa.Column("decision", sa.Text),
        sa.Column("done_at", sa.DateTime(timezone=True)),
        sa.PrimaryKeyConstraint("id", name="pk_slack_requests"),
    )
    op.create_index("ix_slack_requests_received_at", "slack_requests", ["received_at"])
    op.create_index("ix_slack_requests_undone", "slack_requests", ["received_at"],
                    sqlite_where=UNDONE, postgresql_where=UNDONE)


def downgrade() -> None:
    op.drop_index("ix_slack_requests_undone", table_name="slack_requests")
    op.drop_index("ix_slack_requests_received_at", table_name="slack_requests")
    op.drop_table("slack_requests")
