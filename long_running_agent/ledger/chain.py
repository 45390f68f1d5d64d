"""The audit chain's arithmetic: a row's content, encoded canonically, and its hash linked to the previous row's.

Kept apart from the writer (audit.py) so that everything below it can use it: SQLite connections get `link` as a
function (engine.py), the checker recomputes it (audit_check.py). A change of encoding is a new ENCODING.

A row may state facts: the columns of the ticket or payout it records, as they were written (`facts`). The hash
covers them, and `expenses audit verify` compares them with the tables (audit_facts.py).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

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
