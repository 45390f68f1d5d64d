"""Checking the audit chains (audit.py): each ticket's rows against their hashes, and against the head it keeps.

`verify` reads each ticket's head and rows in one statement (one snapshot, on a replica too), a batch of tickets at
a time, and names the first row of each chain that does not hold. `heads` is what an operator anchors outside the
database; `verify(..., anchors=...)` checks that each anchored head is still in its chain (docs/audit-chain.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from sqlalchemy import bindparam, exists, func, select

from ..refusals.rules import TicketNotFound
from ..refusals.values import InputError
from .chain import content, link
from .database import Database
from .schema import AuditRow, TicketRow

BATCH = 1000  # tickets per read: each read is a snapshot, short enough not to hold writers back on SQLite


@dataclass(frozen=True)
class Head:
    """A chain's head: its ticket, how many rows it has and the last one's hash."""

    ticket_id: str
    seq: int
    hash: str

    def __str__(self) -> str:
        return f"{self.ticket_id} {self.seq} {self.hash}"


@dataclass(frozen=True)
class Break:
    """The first row of one chain that does not hold, and what does not match."""

    ticket_id: str
    row_id: int | None
    seq: int | None
    what: str

    def __str__(self) -> str:
        where = f"row {self.row_id} (seq {self.seq})" if self.row_id is not None else (
            f"seq {self.seq}" if self.seq is not None else "its trail")
        return f"ticket {self.ticket_id}, {where}: {self.what}"


@dataclass(frozen=True)
class Verdict:
    """What `verify` found: how many chains and rows it checked, and the first break of each broken chain."""

    chains: int
    rows: int
    breaks: tuple[Break, ...]

    @property
    def holds(self) -> bool:
        return not self.breaks

    @property
    def first(self) -> Break | None:
        return self.breaks[0] if self.breaks else None

    def __str__(self) -> str:
        checked = f"{self.chains:,} audit chain(s), {self.rows:,} row(s)"
        return f"{checked}: every one holds." if self.holds else f"{checked}: {len(self.breaks):,} broken."


_ROWS = (AuditRow.id, AuditRow.seq, AuditRow.hash, AuditRow.at, AuditRow.actor, AuditRow.action, AuditRow.detail)
_CHAINS = (select(TicketRow.id.label("ticket_id"), TicketRow.audit_seq, TicketRow.audit_head, *_ROWS)
           .outerjoin(AuditRow, AuditRow.ticket_id == TicketRow.id).order_by(TicketRow.id, AuditRow.seq))
# The next `batch` tickets after `after`, with their rows.
_NEXT_BATCH = _CHAINS.where(TicketRow.id.in_(
    select(TicketRow.id).where(TicketRow.id > bindparam("after")).order_by(TicketRow.id).limit(bindparam("batch"))))
_NAMED = _CHAINS.where(TicketRow.id.in_(bindparam("ids", expanding=True)))
# Rows whose ticket is gone: their chain has no head to end at.
_ORPHANS = (select(AuditRow.ticket_id, func.min(AuditRow.seq), func.min(AuditRow.id))
            .where(~exists().where(TicketRow.id == AuditRow.ticket_id)).group_by(AuditRow.ticket_id))


def _chain(ticket_id: str, head: Any, rows: list[Any], anchor: Head | None) -> Break | None:
    """The first row of one ticket's chain that does not hold, or None; `head` has the ticket's audit_seq and _head."""
    seq, previous, previous_id = 0, "", None
    anchored = anchor is None
    for row in rows:
        if row.seq != seq + 1:
            return Break(ticket_id, row.id, row.seq, f"the row with seq {seq + 1} is missing before it (deleted)")
        if link(previous, content(ticket_id, row.at, row.actor, row.action, row.detail)) != row.hash:
            return Break(ticket_id, row.id, row.seq, "its hash does not match its content and the previous row's "
                                                     "hash (edited, or moved from elsewhere in the chain)")
        if previous_id is not None and row.id < previous_id:
            return Break(ticket_id, row.id, row.seq, f"it was written before row {previous_id} (seq {seq}), which "
                                                     "comes before it in the chain (reordered)")
        if anchor is not None and row.seq == anchor.seq:
            if row.hash != anchor.hash:
                return Break(ticket_id, row.id, row.seq, f"its hash is not the anchored {anchor.hash[:16]}… "
                                                         "(the chain was rewritten since it was anchored)")
            anchored = True
        seq, previous, previous_id = row.seq, row.hash, row.id
    if (head.audit_seq, head.audit_head) != (seq, previous):
        if head.audit_seq > seq:
            return Break(ticket_id, None, seq + 1, f"the ticket's head says {head.audit_seq} row(s), the trail "
                                                   f"ends at seq {seq} (its last rows were deleted)")
        return Break(ticket_id, previous_id, seq, f"the ticket's head says seq {head.audit_seq}, hash "
                                                  f"{head.audit_head[:16]}…, not this row (the head was changed)")
    if not anchored and anchor is not None:
        return Break(ticket_id, None, anchor.seq, f"anchored with {anchor.seq} row(s), the trail has {seq} "
                                                  "(its last rows were deleted)")
    return None


async def verify(
    database: Database, ticket_ids: Sequence[str] | None = None, *, anchors: Iterable[Head] = (), batch: int = BATCH
) -> Verdict:
    """Check every ticket's audit chain (or these tickets'), and that each anchored head is still in its chain."""
    anchored = {head.ticket_id: head for head in anchors}
    breaks: list[Break] = []
    chains = rows = 0
    seen: set[str] = set()
    async with await database.session() as db:
        async for result in _reads(db, ticket_ids, batch):
            for ticket_id, group in groupby(result, key=lambda row: row.ticket_id):
                joined = list(group)
                chain = [row for row in joined if row.id is not None]
                seen.add(ticket_id)
                chains, rows = chains + 1, rows + len(chain)
                if (found := _chain(ticket_id, joined[0], chain, anchored.get(ticket_id))) is not None:
                    breaks.append(found)
        if ticket_ids is not None and (missing := sorted(set(ticket_ids) - seen)):
            raise TicketNotFound(missing[0])
        orphans = await db.execute(_ORPHANS if ticket_ids is None else _ORPHANS.where(
            AuditRow.ticket_id.in_(list(ticket_ids))))
        for ticket_id, seq, row_id in orphans:
            seen.add(ticket_id)
            breaks.append(Break(ticket_id, row_id, seq, "its ticket is not in the ledger (deleted)"))
    wanted = set(ticket_ids) if ticket_ids is not None else None
    for head in anchored.values():
        if head.ticket_id not in seen and (wanted is None or head.ticket_id in wanted):
            breaks.append(Break(head.ticket_id, None, None, f"anchored with {head.seq} row(s), but the ticket is "
                                                            "not in the ledger (deleted)"))
    return Verdict(chains, rows, tuple(sorted(breaks, key=lambda b: b.ticket_id)))


async def _reads(db: Any, ticket_ids: Sequence[str] | None, batch: int) -> AsyncIterator[Any]:
    """The chains of these tickets, or of every ticket a batch at a time: one statement, so one snapshot, each."""
    if ticket_ids is not None:
        yield await db.execute(_NAMED, {"ids": list(ticket_ids)})
        return
    after = ""
    while rows := (await db.execute(_NEXT_BATCH, {"after": after, "batch": batch})).all():
        yield rows
        if len({row.ticket_id for row in rows}) < batch:  # the last batch: no need to ask for the next
            return
        after = rows[-1].ticket_id


async def heads(database: Database) -> list[Head]:
    """Every chain's head as its ticket keeps it, in ticket order: what an operator anchors outside the database."""
    async with await database.session() as db:
        rows = await db.execute(select(TicketRow.id, TicketRow.audit_seq, TicketRow.audit_head)
                                .where(TicketRow.audit_seq > 0).order_by(TicketRow.id))
        return [Head(*row) for row in rows]


def read_anchors(text: str, source: str) -> list[Head]:
    """The heads `expenses audit head` wrote (one `TICKET SEQ HASH` a line; `#` lines and blank ones skipped)."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3 or not parts[1].isdigit() or len(parts[2]) != 64:
            raise InputError("anchor", f"line {number} of {source} is not a chain's head (TICKET SEQ HASH): "
                                       f"{line[:80]!r}.", next_step="Give the file `expenses audit head` wrote, as it "
                                                                    "wrote it.")
        found.append(Head(parts[0], int(parts[1]), parts[2]))
    return found
