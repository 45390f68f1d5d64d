"""Checking the audit chains (chain.py): each chain's rows against their hashes and its head, and the tables against it.

`verify` reads a batch of tickets at a time, with their rows, payouts and decisions, in one snapshot (on a replica
too), names the first row of each chain that does not hold, and every ticket, payout or decision that disagrees with
a chain that holds (facts.py). Payouts made without approval have chains of their own, keyed by their payout
ids. `heads` is what an operator anchors outside the database; `verify(..., anchors=...)` checks that each anchored
head is still in its chain (docs/audit-chain.md).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from sqlalchemy import String, bindparam, exists, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from ...refusals.rules import TicketNotFound
from ...refusals.values import InputError
from ..storage.database import Database
from ..storage.schema import TICKET_COLUMNS, AuditRow, DecisionRow, PayoutRow, TicketRow
from . import facts
from .chain import content, link
from .facts import Break

__all__ = ["BATCH", "Break", "Head", "Verdict", "heads", "read_anchors", "verify"]

BATCH = 1000  # tickets per read: each read is a snapshot, short enough not to hold writers back on SQLite


@dataclass(frozen=True)
class Head:
    """A chain's head: its ticket (or payout, for one paid without approval), how many rows it has, the last's hash."""

    ticket_id: str
    seq: int
    hash: str

    def __str__(self) -> str:
        return f"{self.ticket_id} {self.seq} {self.hash}"


@dataclass(frozen=True)
class Verdict:
    """What `verify` found: how many chains and rows it checked, the first break of each broken chain, and each row
    of the tables that disagrees with its chain."""

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


@dataclass
class _Found:
    anchored: dict[str, Head]
    chains: int = 0
    rows: int = 0
    breaks: list[Break] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)


_ROWS = (AuditRow.ticket_id, AuditRow.id, AuditRow.seq, AuditRow.hash, AuditRow.at, AuditRow.actor, AuditRow.action,
         AuditRow.detail, AuditRow.facts)
# A batch: its tickets (the next after `after`, or those named), then the rows, payouts and decisions of their ids.
_IDS = bindparam("ids", expanding=True, type_=String)
_TICKETS = select(*TICKET_COLUMNS).where(TicketRow.id > bindparam("after")).order_by(TicketRow.id)
_NAMED = select(*TICKET_COLUMNS).where(TicketRow.id.in_(_IDS)).order_by(TicketRow.id)
_CHAIN_ROWS = select(*_ROWS).where(AuditRow.ticket_id.in_(_IDS)).order_by(AuditRow.ticket_id, AuditRow.seq)
_PAYOUT_COLUMNS = tuple(PayoutRow.__table__.columns)
_PAYOUTS = select(*_PAYOUT_COLUMNS).where(PayoutRow.ticket_id.in_(_IDS))
_DECISIONS = (select(*DecisionRow.__table__.columns).where(DecisionRow.ticket_id.in_(_IDS))
              .order_by(DecisionRow.ticket_id, DecisionRow.id))
# Payouts without a ticket in the ledger (made without approval, or whose ticket is gone): each has its own chain.
_OWN_CHAIN = ~exists().where(TicketRow.id == PayoutRow.ticket_id)
_UNTICKETED = select(*_PAYOUT_COLUMNS).where(_OWN_CHAIN, PayoutRow.id > bindparam("after")).order_by(PayoutRow.id)
# Rows whose ticket or payout is gone: their chain has nothing to end at.
_ORPHANS = (select(AuditRow.ticket_id, func.min(AuditRow.seq), func.min(AuditRow.id))
            .where(~exists().where(TicketRow.id == AuditRow.ticket_id),
                   ~exists().where(PayoutRow.id == AuditRow.ticket_id))
            .group_by(AuditRow.ticket_id))


def _chain(ticket_id: str, head: tuple[int, str] | None, rows: list[Any], anchor: Head | None) -> Break | None:
    """The first row of one chain that does not hold, or None; `head` is the (audit_seq, audit_head) its ticket keeps
    (None for a payout's chain, which has one row and no head)."""
    seq, previous, previous_id = 0, "", None
    anchored = anchor is None
    for row in rows:
        if row.seq != seq + 1:
            return Break(ticket_id, row.id, row.seq, f"the row with seq {seq + 1} is missing before it (deleted)")
        if link(previous, content(ticket_id, row.at, row.actor, row.action, row.detail, row.facts)) != row.hash:
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
    if head is not None and head != (seq, previous):
        if head[0] > seq:
            return Break(ticket_id, None, seq + 1, f"the ticket's head says {head[0]} row(s), the trail "
                                                   f"ends at seq {seq} (its last rows were deleted)")
        return Break(ticket_id, previous_id, seq, f"the ticket's head says seq {head[0]}, hash "
                                                  f"{head[1][:16]}…, not this row (the head was changed)")
    if not anchored and anchor is not None:
        return Break(ticket_id, None, anchor.seq, f"anchored with {anchor.seq} row(s), the trail has {seq} "
                                                  "(its last rows were deleted)")
    return None


async def verify(
    database: Database, ticket_ids: Sequence[str] | None = None, *, anchors: Iterable[Head] = (), batch: int = BATCH
) -> Verdict:
    """Check every chain (or these tickets'), that each anchored head is still in its chain, and that every ticket,
    payout and decision agrees with its chain."""
    found = _Found({head.ticket_id: head for head in anchors})
    async with await database.session() as session:
        async for tickets, rows, payouts, decisions in _ticket_batches(session, ticket_ids, batch):
            for ticket in tickets:
                chain = rows.get(ticket.id, [])
                found.seen.add(ticket.id)
                found.chains, found.rows = found.chains + 1, found.rows + len(chain)
                broken = _chain(ticket.id, (ticket.audit_seq, ticket.audit_head), chain, found.anchored.get(ticket.id))
                found.breaks += [broken] if broken else facts.of_ticket(
                    ticket, chain, payouts.get(ticket.id), decisions.get(ticket.id, []))
        if ticket_ids is not None and (missing := sorted(set(ticket_ids) - found.seen)):
            raise TicketNotFound(missing[0])
        db = await session.connection()
        if ticket_ids is None:
            await _payout_chains(db, found, batch)
        orphans = await db.execute(_ORPHANS if ticket_ids is None else _ORPHANS.where(
            AuditRow.ticket_id.in_(list(ticket_ids))))
        for ticket_id, seq, row_id in orphans:
            found.seen.add(ticket_id)
            found.breaks.append(Break(ticket_id, row_id, seq, "its ticket (or payout) is not in the ledger (deleted)"))
    wanted = set(ticket_ids) if ticket_ids is not None else None
    for head in found.anchored.values():
        if head.ticket_id not in found.seen and (wanted is None or head.ticket_id in wanted):
            found.breaks.append(Break(head.ticket_id, None, None, f"anchored with {head.seq} row(s), but its ticket "
                                                                  "(or payout) is not in the ledger (deleted)"))
    return Verdict(found.chains, found.rows, tuple(sorted(found.breaks, key=lambda b: b.ticket_id)))


@asynccontextmanager
async def _snapshot(session: AsyncSession) -> AsyncIterator[AsyncConnection]:
    """A transaction whose reads all see the ledger at one moment, for a batch's several statements.

    PostgreSQL: REPEATABLE READ. SQLite: an explicit BEGIN (its driver begins none before a SELECT), whose shared
    lock keeps the view until the transaction ends; a writer elsewhere waits for it as it waits for any read.
    """
    try:
        if session.get_bind().dialect.name == "postgresql":
            yield await session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        else:
            db = await session.connection()
            await db.exec_driver_sql("BEGIN")
            yield db
    finally:
        await session.rollback()


async def _ticket_batches(
    session: AsyncSession, ticket_ids: Sequence[str] | None, batch: int
) -> AsyncIterator[tuple[list[Any], dict[str, list[Any]], dict[str, Any], dict[str, list[Any]]]]:
    """These tickets, or every ticket a batch at a time, each batch with its chains' rows, its payouts and its
    decisions by ticket id, read in one snapshot."""
    after = ""
    while True:
        async with _snapshot(session) as db:
            tickets = list(await db.execute(_TICKETS.limit(batch), {"after": after}) if ticket_ids is None
                           else await db.execute(_NAMED, {"ids": list(ticket_ids)}))
            if not tickets:
                return
            ids = {"ids": [ticket.id for ticket in tickets]}
            rows = _by_key(await db.execute(_CHAIN_ROWS, ids))
            payouts = {payout.ticket_id: payout for payout in await db.execute(_PAYOUTS, ids)}
            decisions = _by_key(await db.execute(_DECISIONS, ids))
        yield tickets, rows, payouts, decisions
        if ticket_ids is not None or len(tickets) < batch:  # the last batch: no need to ask for the next
            return
        after = tickets[-1].id


async def _payout_chains(db: AsyncConnection, found: _Found, batch: int) -> None:
    """Each payout without a ticket in the ledger against its own chain, a batch of payouts at a time.

    Two reads, no snapshot: a payout and its chain's row are written in one transaction and never change, so the rows
    read after the payouts hold every row of theirs.
    """
    after = ""
    while payouts := list(await db.execute(_UNTICKETED.limit(batch), {"after": after})):
        rows = _by_key(await db.execute(_CHAIN_ROWS, {"ids": [payout.id for payout in payouts]}))
        for payout in payouts:
            chain = rows.get(payout.id, [])
            found.seen.add(payout.id)
            found.chains, found.rows = found.chains + 1, found.rows + len(chain)
            broken = _chain(payout.id, None, chain, found.anchored.get(payout.id))
            found.breaks += [facts.in_own_chain(payout, broken)] if broken else facts.of_payout(
                payout, chain)
        if len(payouts) < batch:
            return
        after = payouts[-1].id


def _by_key(rows: Iterable[Any]) -> dict[str, list[Any]]:
    """Rows grouped by their ticket id (a chain's key, for audit rows), in the order read."""
    grouped: dict[str, list[Any]] = defaultdict(list)
    for key, group in groupby(rows, key=lambda row: row.ticket_id):
        grouped[key] += group
    return grouped


async def heads(database: Database) -> list[Head]:
    """Every chain's head, in key order: each ticket's as it keeps it, and each payout's made without approval (its
    chain's last row). What an operator anchors outside the database."""
    async with await database.session() as db:
        tickets = await db.execute(select(TicketRow.id, TicketRow.audit_seq, TicketRow.audit_head)
                                   .where(TicketRow.audit_seq > 0))
        payouts = await db.execute(select(AuditRow.ticket_id, AuditRow.seq, AuditRow.hash)
                                   .join(PayoutRow, PayoutRow.id == AuditRow.ticket_id).where(_OWN_CHAIN)
                                   .order_by(AuditRow.ticket_id, AuditRow.seq))
        last = {key: Head(key, seq, digest) for key, seq, digest in payouts}  # each payout chain's last row
        return sorted([Head(*row) for row in tickets] + list(last.values()), key=lambda head: head.ticket_id)


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
