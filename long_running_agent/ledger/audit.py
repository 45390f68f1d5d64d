"""The audit trail: one way to add an entry, in the transaction of the change it records, chained per ticket.

Each row's `hash` is sha256 of the previous row's hash and its content, encoded canonically (chain.py): editing,
deleting or moving a row breaks the chain from there (audit_check.py finds it; docs/audit-chain.md says what that
proves). An entry is one INSERT ... SELECT of its ticket's row, under that row's lock, hashed by the database
(PostgreSQL's sha256, or `audit_link` on SQLite connections: engine.py); a trigger moves the ticket's head
(migration 0010). So two writers in two processes never chain a row to the same predecessor.

An entry that records a ticket's request or a payout states their columns too (`facts`), which the hash covers. A
payout made without approval has no ticket: it gets a chain of its own, keyed by its payout id (`start`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, String, Text, bindparam, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ..refusals.rules import TicketNotFound
from . import chain
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
        bindparam("action", type_=String), bindparam("detail", type_=String), bindparam("facts", type_=Text),
        TicketRow.audit_seq + 1, hashed,
    ).where(TicketRow.id == bindparam("ticket_id", type_=String)).with_for_update(key_share=True)
    return insert(AuditRow).from_select(["ticket_id", "at", "actor", "action", "detail", "facts", "seq", "hash"],
                                        values)


_BODY = bindparam("body", type_=String)
# Built once per database kind (benchmarks/README.md); each computes `link` in the database.
_ADD = {
    "postgresql": _add(func.encode(func.sha256(func.convert_to(TicketRow.audit_head + _BODY, "UTF8")), "hex")),
    "sqlite": _add(func.audit_link(TicketRow.audit_head, _BODY)),
}
_START = insert(AuditRow)


def _entry(key: str, at: datetime, actor: str, action: str, detail: str | None,
           facts: Mapping[str, Any] | None) -> dict[str, Any]:
    """An entry's columns and the content its hash covers (`body`); a detail longer than its column is cut short."""
    at = utc(at)  # stored as hashed, on SQLite too
    detail = detail[:MAX_REASON] if detail else None
    stated = chain.facts(facts) if facts else None
    return {"ticket_id": key, "at": at, "actor": actor, "action": action, "detail": detail, "facts": stated,
            "body": content(key, at, actor, action, detail, stated)}


async def write(
    db: AsyncConnection, ticket_id: str, *, at: datetime, actor: str, action: str, detail: str | None = None,
    facts: Mapping[str, Any] | None = None,
) -> None:
    """Add an entry to `ticket_id`'s trail, stating `facts` ({table: row}, chain.STATED) if given; a detail longer
    than its column holds is cut short, never refused."""
    added = await db.execute(_ADD[db.dialect.name], _entry(ticket_id, at, actor, action, detail, facts))
    if added.rowcount != 1:
        raise TicketNotFound(ticket_id)


async def start(
    db: AsyncConnection, key: str, *, at: datetime, actor: str, action: str, detail: str | None,
    facts: Mapping[str, Any],
) -> None:
    """The first row of a chain of its own, keyed by `key`: a payout's without approval, in its transaction.

    Only the transaction that inserts the payout knows its id, so nothing else writes to this chain: no head to read
    or lock, and UNIQUE (ticket_id, seq) refuses a second first row all the same.
    """
    entry = _entry(key, at, actor, action, detail, facts)
    body = entry.pop("body")
    await db.execute(_START, entry | {"seq": 1, "hash": chain.link("", body)})
