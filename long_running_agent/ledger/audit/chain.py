"""The audit trail: one way to add an entry, in the transaction of the change it records, chained per ticket.

Each row's `hash` is sha256 of the previous row's hash and its content, encoded canonically (`content`; a change of
encoding is a new ENCODING): editing, deleting or moving a row breaks the chain from there (check.py finds it;
docs/audit-chain.md says what that proves). An entry is one INSERT ... SELECT of its ticket's row, under that row's
lock, hashed by the database (sha256; on SQLite the `sha256_hex` function storage/engine.py gives each connection); a
trigger moves the ticket's head (migration 0010). So two writers in two processes never chain a row to the same
predecessor.

An entry that records a ticket's request or a payout states their columns too (`facts`), which the hash covers and
`expenses audit verify` compares with the tables (facts.py). A payout made without approval has no ticket: it gets a
chain of its own, keyed by its payout id (`start`).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, String, Text, bindparam, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ...refusals.rules import TicketNotFound
from ..inputs import MAX_REASON
from ..storage.schema import AuditRow, TicketRow

# The version of `content`'s encoding, inside what is hashed: 1 for a row without facts, 2 for one with them.
ENCODING = 1
WITH_FACTS = 2

# The columns a row's facts hold, per table: a ticket's as it was opened (none of them changes afterwards), and
# every column of a payout. Its status, decision and delivery are stated by the rows that record them.
STATED = {
    "approval_tickets": ("id", "app_name", "user_id", "session_id", "call_id", "purpose", "amount_cents",
                         "created_at", "expires_at", "approvals_needed", "need", "tier", "policy_version",
                         "combined_cents"),
    "approval_payouts": ("id", "ticket_id", "app_name", "call_id", "user_id", "session_id", "purpose",
                         "amount_cents", "paid_at"),
}


def content(ticket_id: str, at: datetime, actor: str, action: str, detail: str | None,
            facts: str | None = None) -> str:
    """What a row's hash covers, as canonical JSON: sorted keys, ASCII only, the time in UTC to the microsecond."""
    row = {"v": ENCODING, "ticket": ticket_id, "at": _time(at), "actor": actor, "action": action, "detail": detail}
    if facts is not None:
        row |= {"v": WITH_FACTS, "facts": facts}
    return json.dumps(row, sort_keys=True, separators=(",", ":"))


def facts(rows: Mapping[str, Any]) -> str:
    """The facts a row states about table rows (`{"approval_payouts": payout, ...}`, each a mapping or a row with
    attributes), as canonical JSON of the columns STATED for each table."""
    return json.dumps({table: stated(table, row) for table, row in rows.items()}, sort_keys=True,
                      separators=(",", ":"))


def stated(table: str, row: Any) -> dict[str, Any]:
    """The columns STATED for `table` of `row` (a mapping, or a row with attributes) as facts hold them: times in
    UTC as text."""
    read = row.__getitem__ if isinstance(row, Mapping) else functools.partial(getattr, row)
    return {column: _value(read(column)) for column in STATED[table]}


def link(previous: str, body: str) -> str:
    """A row's hash: sha256 of the previous row's hash ("" before a ticket's first row) and its content."""
    return hashlib.sha256((previous + body).encode("ascii")).hexdigest()


def utc(at: datetime) -> datetime:
    """`at` in UTC; a time without a zone is taken as UTC, as SQLite hands back what was stored in UTC."""
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(UTC)


def _time(at: datetime) -> str:
    return utc(at).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _value(value: Any) -> Any:
    return _time(value) if isinstance(value, datetime) else value


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
    "sqlite": _add(func.sha256_hex(TicketRow.audit_head + _BODY)),
}
_START = insert(AuditRow)


def _entry(key: str, at: datetime, actor: str, action: str, detail: str | None,
           rows: Mapping[str, Any] | None) -> dict[str, Any]:
    """An entry's columns and the content its hash covers (`body`); a detail longer than its column is cut short."""
    at = utc(at)  # stored as hashed, on SQLite too
    detail = detail[:MAX_REASON] if detail else None
    written = facts(rows) if rows else None
    return {"ticket_id": key, "at": at, "actor": actor, "action": action, "detail": detail, "facts": written,
            "body": content(key, at, actor, action, detail, written)}


async def write(
    db: AsyncConnection, ticket_id: str, *, at: datetime, actor: str, action: str, detail: str | None = None,
    facts: Mapping[str, Any] | None = None,
) -> None:
    """Add an entry to `ticket_id`'s trail, stating `facts` ({table: row}, STATED) if given; a detail longer than its
    column holds is cut short, never refused."""
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
    await db.execute(_START, entry | {"seq": 1, "hash": link("", body)})
