"""The audit trail: one way to add an entry, in the transaction of the change it records."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from .inputs import MAX_REASON
from .schema import AuditRow

_ADD = insert(AuditRow)


async def write(
    db: AsyncConnection, ticket_id: str, *, at: datetime, actor: str, action: str, detail: str | None = None
) -> None:
    """Add an entry to `ticket_id`'s trail; a detail longer than its column holds is cut short, never refused."""
    await db.execute(_ADD, {"ticket_id": ticket_id, "at": at, "actor": actor, "action": action,
                            "detail": detail[:MAX_REASON] if detail else None})
