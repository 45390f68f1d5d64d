"""The audit chain's arithmetic: a row's content, encoded canonically, and its hash linked to the previous row's.

Kept apart from the writer (audit.py) so that everything below it can use it: SQLite connections get `link` as a
function (engine.py), the checker recomputes it (audit_check.py). A change of encoding is a new ENCODING.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

# The version of `content`'s encoding, inside what is hashed: another encoding is another version.
ENCODING = 1


def content(ticket_id: str, at: datetime, actor: str, action: str, detail: str | None) -> str:
    """What a row's hash covers, as canonical JSON: sorted keys, ASCII only, the time in UTC to the microsecond."""
    return json.dumps({"v": ENCODING, "ticket": ticket_id, "at": utc(at).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                       "actor": actor, "action": action, "detail": detail}, sort_keys=True, separators=(",", ":"))


def link(previous: str, body: str) -> str:
    """A row's hash: sha256 of the previous row's hash ("" before a ticket's first row) and its content."""
    return hashlib.sha256((previous + body).encode("ascii")).hexdigest()


def utc(at: datetime) -> datetime:
    """`at` in UTC; a time without a zone is taken as UTC, as SQLite hands back what was stored in UTC."""
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(UTC)
