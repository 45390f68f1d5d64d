"""Interactive Slack approvals: the signatures of the requests taken in the last minutes, to refuse replays.

Revision ID: 0006
Revises: 0005
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "slack_requests",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_slack_requests"),
    )
    op.create_index("ix_slack_requests_received_at", "slack_requests", ["received_at"])


def downgrade() -> None:
    op.drop_index("ix_slack_requests_received_at", table_name="slack_requests")
    op.drop_table("slack_requests")
