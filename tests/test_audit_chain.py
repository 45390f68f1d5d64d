"""The audit trail is hash-chained per ticket: a row edited, deleted or moved in the database is found and named.

Each test tampers with the rows as someone with SQL access would, on SQLite and PostgreSQL, and `verify` (or
`expenses audit verify`) names the first row that does not hold. A rewrite of every later row and of the head is
not found by the chain alone, only by a head anchored before it (docs/audit-chain.md).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from sqlalchemy import select, text
from support import cli, sources
from support.releases import load_release_0_1
from support.tickets import open_ticket_for, pay_and_mark_delivered

from long_running_agent.ledger import Ledger
from long_running_agent.ledger.audit.chain import content, link
from long_running_agent.ledger.audit.check import Head, heads, verify
from long_running_agent.ledger.storage import migrate
from long_running_agent.ledger.storage.schema import AuditRow


async def _trail(ledger: Ledger) -> tuple[str, list[int]]:
    """A ticket with a trail (requested, refused, approved and what goes with it, paid, delivered): its rows' ids in
    order."""
    ticket = await open_ticket_for(ledger, 25_000)
    await ledger.tickets.record_refusal(ticket.id, actor="mallory", detail="response claiming 'approved'")
    approved = await ledger.tickets.decide(ticket.id, approver="bob", approve=True)
    await pay_and_mark_delivered(ledger, approved, actor="bob")
    return ticket.id, await _row_ids(ledger, ticket.id)


async def _row_ids(ledger: Ledger, ticket_id: str) -> list[int]:
    async with ledger.engine.connect() as db:
        return list(await db.scalars(text("SELECT id FROM approval_audit WHERE ticket_id = :t ORDER BY seq"),
                                     {"t": ticket_id}))


async def _sql(ledger: Ledger, *statements: str, **values: Any) -> None:
    """Change the rows by hand, as someone with the database's password would."""
    async with ledger.engine.begin() as db:
        for statement in statements:
            await db.execute(text(statement), values)


async def test_a_ledger_written_by_the_app_verifies(desk, db_url):
    ledger = desk.ledger
    ticket_id, rows = await _trail(ledger)
    other = await open_ticket_for(ledger, 30_000, session="s-2")

    verdict = await verify(ledger.database)

    assert verdict.holds and verdict.first is None
    assert (verdict.chains, verdict.rows) == (2, len(rows) + 1)
    assert [(h.ticket_id, h.seq) for h in await heads(ledger.database)] == sorted([(ticket_id, len(rows)),
                                                                                     (other.id, 1)])
    assert (await verify(ledger.database, [ticket_id])).rows == len(rows)


@pytest.mark.parametrize("batch", [1, 2, 3, 5])
async def test_every_chain_is_read_whatever_the_batch_size(desk, db_url, batch):
    ledger = desk.ledger
    tickets = [await open_ticket_for(ledger, 30_000, session=f"s-{n}") for n in range(5)]
    last = max(tickets, key=lambda ticket: ticket.id)  # read in the last batch, after every other
    [row] = await _row_ids(ledger, last.id)
    await _sql(ledger, "UPDATE approval_audit SET actor = 'mallory' WHERE id = :row", row=row)

    verdict = await verify(ledger.database, batch=batch)

    assert (verdict.chains, verdict.rows) == (5, 5)
    assert [b.ticket_id for b in verdict.breaks] == [last.id]


async def test_an_edited_detail_is_named_by_its_row(desk, db_url):
    ledger = desk.ledger
    ticket_id, rows = await _trail(ledger)
    await _sql(ledger, "UPDATE approval_audit SET detail = 'approved by the CFO' WHERE id = :row", row=rows[1])

    verdict = await verify(ledger.database, [ticket_id])

    assert not verdict.holds
    assert verdict.first is not None and (verdict.first.ticket_id, verdict.first.row_id, verdict.first.seq) == (
        ticket_id, rows[1], 2)


async def test_a_deleted_middle_row_is_named_by_the_row_after_it(desk, db_url):
    ledger = desk.ledger
    ticket_id, rows = await _trail(ledger)
    await _sql(ledger, "DELETE FROM approval_audit WHERE id = :row", row=rows[1])

    [broken] = (await verify(ledger.database)).breaks

    assert (broken.ticket_id, broken.row_id, broken.seq) == (ticket_id, rows[2], 3)
    assert "seq 2 is missing" in broken.what


async def test_a_middle_row_deleted_and_the_rest_renumbered_is_found(desk, db_url):
    ledger = desk.ledger
    ticket_id, rows = await _trail(ledger)
    await _sql(ledger, "DELETE FROM approval_audit WHERE id = :row",
               "UPDATE approval_audit SET seq = seq - 1 WHERE ticket_id = :t AND seq > 2",
               "UPDATE approval_tickets SET audit_seq = audit_seq - 1 WHERE id = :t", row=rows[1], t=ticket_id)

    [broken] = (await verify(ledger.database)).breaks

    assert (broken.row_id, broken.seq) == (rows[2], 2)


async def test_a_deleted_last_row_is_found_by_the_head_its_ticket_keeps(desk, db_url):
    ledger = desk.ledger
    ticket_id, rows = await _trail(ledger)
    await _sql(ledger, "DELETE FROM approval_audit WHERE id = :row", row=rows[-1])

    [broken] = (await verify(ledger.database)).breaks

    assert (broken.ticket_id, broken.row_id, broken.seq) == (ticket_id, None, len(rows))
    assert f"head says {len(rows)} row" in broken.what


async def test_two_rows_with_their_contents_swapped_are_found(desk, db_url):
    ledger = desk.ledger
    ticket_id, rows = await _trail(ledger)
    _, second, third, *_ = await _rows(ledger, ticket_id)
    for row, other in ((second, third), (third, second)):
        await _sql(ledger, "UPDATE approval_audit SET actor = :actor, action = :action, detail = :detail "
                           "WHERE id = :row", actor=other.actor, action=other.action, detail=other.detail, row=row.id)

    [broken] = (await verify(ledger.database)).breaks

    assert (broken.row_id, broken.seq) == (rows[1], 2)


@pytest.mark.parametrize(("swap", "found"), [
    # The refusal and the approval trade places in the chain, each keeping its own content and hash.
    (("UPDATE approval_audit SET seq = 0 WHERE id = :second", "UPDATE approval_audit SET seq = 2 WHERE id = :third",
      "UPDATE approval_audit SET seq = 3 WHERE id = :second"), (2, 2)),
    # The history is shown in the order of ids: the approval moved before the refusal there, with each row's content.
    (("UPDATE approval_audit SET id = 1000000 WHERE id = :second",
      "UPDATE approval_audit SET id = :second WHERE id = :third",
      "UPDATE approval_audit SET id = :third WHERE id = 1000000"), (1, 3)),
], ids=["moved in the chain", "reordered by id"])
async def test_two_rows_that_trade_places_are_found(desk, db_url, swap, found):
    ledger = desk.ledger
    ticket_id, rows = await _trail(ledger)
    await _sql(ledger, *swap, second=rows[1], third=rows[2])

    [broken] = (await verify(ledger.database)).breaks

    row, seq = found
    assert (broken.row_id, broken.seq) == (rows[row], seq)


async def test_rows_whose_ticket_was_deleted_are_found(desk, db_url):
    ledger = desk.ledger
    ticket_id, rows = await _trail(ledger)
    await _sql(ledger, "DELETE FROM approval_payouts WHERE ticket_id = :t",
               "DELETE FROM approval_tickets WHERE id = :t", t=ticket_id)

    [broken] = (await verify(ledger.database)).breaks

    assert (broken.ticket_id, broken.row_id, broken.seq) == (ticket_id, rows[0], 1)


async def _rows(ledger: Ledger, ticket_id: str) -> list[Any]:
    async with ledger.engine.connect() as db:
        return list(await db.execute(select(AuditRow.id, AuditRow.at, AuditRow.actor, AuditRow.action,
                                            AuditRow.detail, AuditRow.facts).where(AuditRow.ticket_id == ticket_id)
                                     .order_by(AuditRow.seq)))


async def _rewrite_consistently(ledger: Ledger, ticket_id: str, row_id: int, detail: str) -> None:
    """Edit a row and recompute its hash, every later one's and the head: what the chain alone cannot show."""
    await _sql(ledger, "UPDATE approval_audit SET detail = :detail WHERE id = :row", detail=detail, row=row_id)
    previous = ""
    for row in await _rows(ledger, ticket_id):
        previous = link(previous, content(ticket_id, row.at, row.actor, row.action, row.detail, row.facts))
        await _sql(ledger, "UPDATE approval_audit SET hash = :h WHERE id = :row", h=previous, row=row.id)
    await _sql(ledger, "UPDATE approval_tickets SET audit_head = :h WHERE id = :t", h=previous, t=ticket_id)


async def test_a_consistent_rewrite_passes_the_chain_but_not_a_head_anchored_before_it(desk, db_url):
    ledger = desk.ledger
    ticket_id, rows = await _trail(ledger)
    anchored = await heads(ledger.database)
    await _rewrite_consistently(ledger, ticket_id, rows[1], "nothing happened here")

    assert (await verify(ledger.database)).holds, "the documented limit: a consistent rewrite is not found"
    [broken] = (await verify(ledger.database, anchors=anchored)).breaks
    assert (broken.ticket_id, broken.row_id, broken.seq) == (ticket_id, rows[-1], len(rows))


async def test_an_anchored_ticket_deleted_with_all_its_rows_is_found(desk, db_url):
    ledger = desk.ledger
    ticket_id, _ids = await _trail(ledger)
    anchored = await heads(ledger.database)
    await _sql(ledger, "DELETE FROM approval_audit WHERE ticket_id = :t",
               "DELETE FROM approval_payouts WHERE ticket_id = :t", "DELETE FROM approval_tickets WHERE id = :t",
               t=ticket_id)

    assert (await verify(ledger.database)).holds
    [broken] = (await verify(ledger.database, anchors=anchored)).breaks
    assert broken.ticket_id == ticket_id and "not in the ledger" in broken.what


async def test_a_chain_that_grew_after_its_anchor_still_holds_against_it(desk, db_url):
    ledger = desk.ledger
    ticket = await open_ticket_for(ledger, 25_000)
    anchored = await heads(ledger.database)
    await ledger.tickets.decide(ticket.id, approver="bob", approve=True)

    verdict = await verify(ledger.database, anchors=anchored)

    assert verdict.holds and anchored == [Head(ticket.id, 1, anchored[0].hash)]


async def test_writers_on_one_ticket_from_two_engines_never_fork_its_chain(desk, db_url):
    first = desk.ledger
    ticket = await open_ticket_for(first, 25_000)
    second = Ledger(db_url)  # its own engine and connections, as another replica has
    try:
        refusals = [ledger.tickets.record_refusal(ticket.id, actor=f"replica-{n % 2}", detail=f"refusal {n}")
                    for n, ledger in enumerate([first, second] * 15)]
        await asyncio.gather(*refusals, second.tickets.decide(ticket.id, approver="bob", approve=True))
    finally:
        await second.close()

    async with first.engine.connect() as db:
        seqs = list(await db.scalars(text("SELECT seq FROM approval_audit WHERE ticket_id = :t ORDER BY id"),
                                     {"t": ticket.id}))
    assert len(seqs) >= 32, "the request, thirty refusals and the approval"
    assert seqs == list(range(1, len(seqs) + 1)), "each row follows the one written before it, none twice"
    assert (await verify(first.database)).holds


async def test_an_upgraded_release_0_1_ledger_verifies(desk, db_url):
    await asyncio.to_thread(load_release_0_1, db_url)
    ledger = desk.ledger
    await ledger.prepare()

    verdict = await verify(ledger.database)

    assert verdict.holds and verdict.rows > 0
    assert sum(head.seq for head in await heads(ledger.database)) == verdict.rows


def test_a_new_database_gets_the_audit_head_trigger_migration_0010_makes():
    migration = sources.migration("0010")

    assert migrate._SQLITE_AUDIT_HEAD == (migration.SQLITE_TRIGGER,)
    assert migrate._POSTGRESQL_AUDIT_HEAD == (migration.POSTGRESQL_FUNCTION, migration.POSTGRESQL_TRIGGER)


async def test_the_cli_exits_0_on_a_real_flow_and_1_naming_the_row_once_one_is_edited(desk, db_url, tmp_path):
    def expenses(*args: str) -> Any:  # the CLI's main(argv), in a thread of its own: it runs its own event loop
        return asyncio.to_thread(cli.expenses, *args, url=db_url)

    ticket_id = await asyncio.to_thread(cli.request_ticket, db_url)
    assert (await expenses("approve", ticket_id, "--approver", "bob")).returncode == 0
    anchor = tmp_path / "heads.txt"

    verified = await expenses("audit", "verify")
    head = await expenses("audit", "head")
    anchor.write_text(head.stdout)

    assert verified.returncode == 0, verified.stderr
    assert re.search(rf"^{ticket_id} (\d+) [0-9a-f]{{64}}$", head.stdout, re.M)
    assert (await expenses("audit", "verify", "--anchor", str(anchor))).returncode == 0
    [edited, *_] = await _row_ids(desk.ledger, ticket_id)
    await _sql(desk.ledger, "UPDATE approval_audit SET actor = 'mallory' WHERE id = :row", row=edited)
    broken = await expenses("audit", "verify", "--anchor", str(anchor))
    assert broken.returncode == 1
    assert f"ticket {ticket_id}, row {edited} (seq 1)" in broken.stderr
    refused = await expenses("audit", "verify", "--anchor", str(tmp_path / "missing.txt"))
    assert refused.returncode == 1 and "missing.txt cannot be read" in refused.stderr
