"""The number of pending tickets, kept by triggers in the same transaction as each ticket's change.

The inbox shows how many tickets wait. Counting them reads one index entry
per pending ticket, so that read grows with the backlog; this count is kept
as tickets change instead, by the database, whatever writes the tickets.
SQLite: row triggers on one row (SQLite has one writer at a time anyway).
PostgreSQL: statement triggers (one update however many rows a statement
changes) on one of SHARDS rows picked at random, so that concurrent
transactions seldom queue on the same row."""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"

SHARDS = 16

# SQLite: the change of one row at a time; `excluded` is the row the upsert proposed.
_SQLITE_ADD = ("INSERT INTO pending_counts (shard, pending) VALUES (0, {delta}) "
               "ON CONFLICT (shard) DO UPDATE SET pending = pending + excluded.pending;")
_MOVED = "CASE WHEN NEW.status = 'pending' THEN 1 ELSE -1 END"
SQLITE_TRIGGERS = (
    "CREATE TRIGGER pending_count_insert AFTER INSERT ON approval_tickets WHEN NEW.status = 'pending' "
    f"BEGIN {_SQLITE_ADD.format(delta=1)} END",
    "CREATE TRIGGER pending_count_update AFTER UPDATE OF status ON approval_tickets "
    "WHEN (OLD.status = 'pending') <> (NEW.status = 'pending') "
    f"BEGIN {_SQLITE_ADD.format(delta=_MOVED)} END",
    "CREATE TRIGGER pending_count_delete AFTER DELETE ON approval_tickets WHEN OLD.status = 'pending' "
    f"BEGIN {_SQLITE_ADD.format(delta=-1)} END",
)

POSTGRESQL_FUNCTION = f"""
CREATE FUNCTION count_pending_tickets() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    delta bigint := 0;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        delta := delta + (SELECT count(*) FROM added WHERE status = 'pending');
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        delta := delta - (SELECT count(*) FROM removed WHERE status = 'pending');
    END IF;
    IF delta <> 0 THEN
        INSERT INTO pending_counts (shard, pending) VALUES (floor(random() * {SHARDS})::int, delta)
        ON CONFLICT (shard) DO UPDATE SET pending = pending_counts.pending + excluded.pending;
    END IF;
    RETURN NULL;
END $$
"""
POSTGRESQL_TRIGGERS = (
    "CREATE TRIGGER pending_count_insert AFTER INSERT ON approval_tickets "
    "REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION count_pending_tickets()",
    "CREATE TRIGGER pending_count_update AFTER UPDATE ON approval_tickets "
    "REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION count_pending_tickets()",
    "CREATE TRIGGER pending_count_delete AFTER DELETE ON approval_tickets "
    "REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION count_pending_tickets()",
)
TRIGGER_NAMES = ("pending_count_insert", "pending_count_update", "pending_count_delete")


def upgrade() -> None:
    op.create_table(
        "pending_counts",
        sa.Column("shard", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("pending", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("shard", name="pk_pending_counts"),
    )
    # The tickets pending now; the triggers keep the count from here on, in the same transaction.
    op.execute("INSERT INTO pending_counts (shard, pending) "
               "SELECT 0, count(*) FROM approval_tickets WHERE status = 'pending'")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(POSTGRESQL_FUNCTION)
        for trigger in POSTGRESQL_TRIGGERS:
            op.execute(trigger)
    else:
        for trigger in SQLITE_TRIGGERS:
            op.execute(trigger)


def downgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    for name in TRIGGER_NAMES:
        op.execute(f"DROP TRIGGER {name}" + (" ON approval_tickets" if postgresql else ""))
    if postgresql:
        op.execute("DROP FUNCTION count_pending_tickets()")
    op.drop_table("pending_counts")
