"""The audit trail: one way to add an entry, in the transaction of the change it records, chained per ticket.

Each row's `hash` is sha256 of the previous row's hash and its content, encoded canonically (chain.py): editing,
deleting or moving a row breaks the chain from there (audit_check.py finds it; docs/audit-chain.md says what that
proves). An entry is one INSERT ... SELECT of its ticket's row, under that row's lock, hashed by the database
(PostgreSQL's sha256, or `audit_link` on SQLite connections: engine.py); a trigger moves the ticket's head
(migration 0010). So two writers in two processes never chain a row to the same predecessor.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, String, bindparam, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ..refusals.rules import TicketNotFound
from .chain import content, utc
from .inputs import MAX_REASON
from .schema import AuditRow, TicketRow


def _add(hashed: Any) -> Any:
    """Insert an entry after the ticket's head, read under the ticket row's lock (SQLite has one writer anyway).

    FOR NO KEY UPDATE: the lock an UPDATE of the ticket takes, so audit writers and the ticket's moves queue on it,
    while a payout's foreign key check (FOR KEY SHARE) does not wait for it.
    """
    values = select(
        TicketRow.id, bindparam("at", type_=DateTime(timezone=True)), bindparam("actor", type_=String),
        bindparam("action", type_=String), bindparam("detail", type_=String), TicketRow.audit_seq + 1, hashed,
    ).where(TicketRow.id == bindparam("ticket_id", type_=String)).with_for_update(key_share=True)
    return insert(AuditRow).from_select(["ticket_id", "at", "actor", "action", "detail", "seq", "hash"], values)


_BODY = bindparam("body", type_=String)
# Built once per database kind (benchmarks/README.md); each computes `link` in the database.
_ADD = {
    "postgresql": _add(func.encode(func.sha256(func.convert_to(TicketRow.audit_head + _BODY, "UTF8")), "hex")),
    "sqlite": _add(func.audit_link(TicketRow.audit_head, _BODY)),
}


async def write(
    db: AsyncConnection, ticket_id: str, *, at: datetime, actor: str, action: str, detail: str | None = None
) -> None:
    """Add an entry to `ticket_id`'s trail; a detail longer than its column holds is cut short, never refused."""
    at = utc(at)  # stored as hashed, on SQLite too
    detail = detail[:MAX_REASON] if detail else None
    added = await db.execute(_ADD[db.dialect.name], {
        "ticket_id": ticket_id, "at": at, "actor": actor, "action": action, "detail": detail,
        "body": content(ticket_id, at, actor, action, detail)})
    if added.rowcount != 1:
        raise TicketNotFound(ticket_id)
