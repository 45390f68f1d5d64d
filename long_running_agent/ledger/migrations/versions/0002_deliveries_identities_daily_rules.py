"""Deliveries, conversations, settling, the daily rules and the inbox's indexes.

- tickets: where the conversation lives (`session_store`), why a delivery
  failed, who settled it; tickets and payouts are matched by app, user and
  session, not by session alone; the delivery claim (`resumed_at`) is gone:
  conversation locks do its job;
- payouts: the app they belong to;
- new tables: `conversation_locks`, `daily_auto_approvals`, `auto_approved_payouts`;
- the indexes the inbox reads.

SQLite cannot change a table's constraints in place, so tickets and payouts
are rebuilt: renamed aside, created anew, copied, dropped. Each upgrade runs in
one transaction: it completes, or nothing changed."""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"

UNDELIVERED = sa.text("delivered_at IS NULL AND settled_at IS NULL AND decided_at IS NOT NULL")
TICKET_COLUMNS = ("id, app_name, user_id, session_id, call_id, call_name, purpose, amount_cents, status, "
                  "created_at, expires_at, decided_by, decided_at, reason, delivered_at")


def upgrade() -> None:
    op.rename_table("approval_payouts", "approval_payouts_0001")
    op.rename_table("approval_tickets", "approval_tickets_0001")

    op.create_table(
        "approval_tickets",
        sa.Column("id", sa.String(40), nullable=False),
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
        sa.Column("session_store", sa.String(1000), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True)),
        sa.Column("delivery_error", sa.String(500)),
        sa.Column("settled_by", sa.String(128)),
        sa.Column("settled_at", sa.DateTime(timezone=True)),
        sa.PrimaryKeyConstraint("id", name="pk_approval_tickets"),
        sa.UniqueConstraint("app_name", "user_id", "session_id", "call_id",
                            name="uq_approval_tickets_app_name_user_id_session_id_call_id"),
    )
    # 0.1 kept every conversation in the app's own database.
    op.execute(f"INSERT INTO approval_tickets ({TICKET_COLUMNS}, session_store) "
               f"SELECT {TICKET_COLUMNS}, 'app' FROM approval_tickets_0001")

    op.create_table(
        "approval_payouts",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("ticket_id", sa.String(40)),
        sa.Column("app_name", sa.String(128), nullable=False),
        sa.Column("call_id", sa.String(128), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("purpose", sa.String(300), nullable=False),
        sa.Column("amount_cents", sa.Integer, nullable=False),
        sa.Column("paid_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_approval_payouts"),
        sa.ForeignKeyConstraint(["ticket_id"], ["approval_tickets.id"],
                                name="fk_approval_payouts_ticket_id_approval_tickets"),
        sa.UniqueConstraint("ticket_id", name="uq_approval_payouts_ticket_id"),
        sa.UniqueConstraint("app_name", "user_id", "session_id", "call_id",
                            name="uq_approval_payouts_app_name_user_id_session_id_call_id"),
    )
    # 0.1 served one app; its payouts without a ticket belong to it too.
    op.execute(
        "INSERT INTO approval_payouts (id, ticket_id, app_name, call_id, user_id, session_id, purpose, "
        "amount_cents, paid_at) "
        "SELECT p.id, p.ticket_id, COALESCE(t.app_name, 'long_running_agent'), p.call_id, p.user_id, "
        "p.session_id, p.purpose, p.amount_cents, p.paid_at "
        "FROM approval_payouts_0001 p LEFT JOIN approval_tickets t ON t.id = p.ticket_id"
    )
    op.drop_table("approval_payouts_0001")
    op.drop_table("approval_tickets_0001")

    # Created after the old tables are gone: index names are unique per database.
    op.create_index("ix_approval_tickets_session_id", "approval_tickets", ["session_id"])
    op.create_index("ix_approval_tickets_status_created_id", "approval_tickets", ["status", "created_at", "id"])
    op.create_index("ix_approval_tickets_decided", "approval_tickets", ["decided_at", "id"])
    op.create_index("ix_approval_tickets_status_expires", "approval_tickets", ["status", "expires_at"])
    op.create_index("ix_approval_tickets_undelivered", "approval_tickets",
                    ["decided_at", "id", "delivered_at", "settled_at"],
                    sqlite_where=UNDELIVERED, postgresql_where=UNDELIVERED)
    op.create_index("ix_approval_payouts_session_id", "approval_payouts", ["session_id"])

    op.create_table(
        "daily_auto_approvals",
        sa.Column("requester", sa.String(128), nullable=False),
        sa.Column("day", sa.Date, nullable=False),
        sa.Column("total_cents", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("requester", "day", name="pk_daily_auto_approvals"),
    )
    op.create_table(
        "auto_approved_payouts",
        sa.Column("payout_id", sa.String(40), nullable=False),
        sa.Column("requester", sa.String(128), nullable=False),
        sa.Column("day", sa.Date, nullable=False),
        sa.Column("purpose_key", sa.String(300), nullable=False),
        sa.PrimaryKeyConstraint("payout_id", name="pk_auto_approved_payouts"),
        sa.ForeignKeyConstraint(["payout_id"], ["approval_payouts.id"],
                                name="fk_auto_approved_payouts_payout_id_approval_payouts"),
        sa.UniqueConstraint("requester", "day", "purpose_key",
                            name="uq_auto_approved_payouts_requester_day_purpose_key"),
    )
    op.create_table(
        "conversation_locks",
        sa.Column("app_name", sa.String(128), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("purpose", sa.String(200), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "user_id", "session_id", name="pk_conversation_locks"),
    )


def downgrade() -> None:
    raise NotImplementedError("0.1 cannot hold what this revision added (where conversations live, settlements); "
                              "restore a backup taken before the upgrade instead.")
