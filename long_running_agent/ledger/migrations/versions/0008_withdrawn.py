"""One word for a withdrawal: a ticket its requester withdrew is `withdrawn` (it was `cancelled`)."""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"

TICKETS = sa.table("approval_tickets", sa.column("status", sa.String))


def upgrade() -> None:
    op.execute(TICKETS.update().where(TICKETS.c.status == "cancelled").values(status="withdrawn"))


def downgrade() -> None:
    op.execute(TICKETS.update().where(TICKETS.c.status == "withdrawn").values(status="cancelled"))
