"""Other agents' tasks over A2A (long_running_agent/a2a/) and where their outcomes are pushed.

A task keeps which client sent which message (UNIQUE, so a retried send opens no second ticket), the conversation it
runs in and the ticket its turn opened; its state is read from that ticket, never stored.
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"


def upgrade() -> None:
    when, name, uid = sa.DateTime(timezone=True), sa.String(128), sa.String(40)
    op.create_table(
        "a2a_tasks",
        sa.Column("id", uid, nullable=False), sa.Column("client", name, nullable=False),
        sa.Column("message_id", name, nullable=False), sa.Column("context_id", name, nullable=False),
        sa.Column("session_id", name, nullable=False), sa.Column("created_at", when, nullable=False),
        sa.Column("finished_at", when), sa.Column("ticket_id", uid),
        sa.Column("payout_ids", sa.Text), sa.Column("reply", sa.Text), sa.Column("error", sa.Text),
        sa.PrimaryKeyConstraint("id", name="pk_a2a_tasks"),
        sa.UniqueConstraint("client", "message_id", name="uq_a2a_tasks_client_message_id"),
        sa.Index("ix_a2a_tasks_client", "client", "created_at"), sa.Index("ix_a2a_tasks_ticket_id", "ticket_id"),
    )
    op.create_table(
        "a2a_push_configs",
        sa.Column("task_id", uid, nullable=False), sa.Column("id", name, nullable=False),
        sa.Column("url", sa.Text, nullable=False), sa.Column("token", sa.Text), sa.Column("queued_at", when),
        sa.PrimaryKeyConstraint("task_id", "id", name="pk_a2a_push_configs"),
        sa.ForeignKeyConstraint(["task_id"], ["a2a_tasks.id"], name="fk_a2a_push_configs_task_id_a2a_tasks"),
    )


def downgrade() -> None:
    op.drop_table("a2a_push_configs")
    op.drop_table("a2a_tasks")
