"""The audit trail covers what was asked, decided and paid: a ticket, payout or decision edited in its own table, or a
payout added there, disagrees with its chain, and `verify` names the row by its table and id (docs/audit-chain.md).

Each test states one rule of what a chain says about the tables, tampers with a table as someone with SQL access
would (the chains themselves untouched), on SQLite and PostgreSQL, and finds the row named. The last one is the
probe that found the gap: heads anchored with `expenses audit head`, then `expenses audit verify --anchor`.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, NamedTuple

import pytest
from sqlalchemy import select, text
from support import cli
from support.tickets import open_ticket_for

from long_running_agent.ledger import Conversation, Ledger
from long_running_agent.ledger.audit.chain import content, link
from long_running_agent.ledger.audit.check import Break, heads, verify
from long_running_agent.ledger.storage.schema import AuditRow


class Paid(NamedTuple):
    """A ledger's tickets and payouts: one approved and paid, one pending, one payout made without approval."""

    ledger: Ledger
    paid_ticket: str
    payout: str
    pending_ticket: str
    small_payout: str


async def _paid(ledger: Ledger) -> Paid:
    ticket = await open_ticket_for(ledger, 25_000, purpose="team lunch")
    approved = await ledger.tickets.decide(ticket.id, approver="bob", approve=True)
    payout, _ = await ledger.payouts.pay_approved(conversation=approved.conversation, call_id="pay-1",
                                                  purpose=approved.purpose, amount_cents=approved.payable_cents)
    pending = await open_ticket_for(ledger, 30_000, purpose="hotel", session="s-2")
    small, _ = await ledger.payouts.pay_small(
        conversation=Conversation("long_running_agent", "alice", "s-3"), call_id="taxi-1", purpose="taxi",
        amount_cents=4_250, requester="alice", purpose_key="taxi", daily_limit_cents=25_000)
    assert (await verify(ledger.database)).holds
    return Paid(ledger, ticket.id, payout.id, pending.id, small.id)


async def _sql(ledger: Ledger, statement: str, **values: Any) -> None:
    """Change a table by hand, as someone with the database's password would; the audit rows stay as they are."""
    async with ledger.engine.begin() as db:
        await db.execute(text(statement), values)


async def _named(ledger: Ledger, table: str) -> list[Break]:
    """What `verify` names in `table`; the chains themselves all hold."""
    verdict = await verify(ledger.database)
    assert not verdict.holds
    assert all(broken.table != "approval_audit" for broken in verdict.breaks), verdict.breaks
    return [broken for broken in verdict.breaks if broken.table == table]


@pytest.mark.parametrize("approved", [True, False], ids=["approved", "without_approval"])
async def test_a_payout_whose_amount_differs_from_its_paid_row_is_named(desk, db_url, approved):
    """A payout without approval has a chain of its own, keyed by the payout."""
    found = await _paid(desk.ledger)
    payout, chain, paid = ((found.payout, found.paid_ticket, 25000) if approved
                           else (found.small_payout, found.small_payout, 4250))
    await _sql(found.ledger, "UPDATE approval_payouts SET amount_cents = 900000 WHERE id = :p", p=payout)

    [named] = await _named(found.ledger, "approval_payouts")

    assert (named.key, named.ticket_id) == (payout, chain)
    assert f"amount_cents is 900000, not {paid} as its paid row" in named.what
    if approved:
        document = await found.ledger.evidence(found.paid_ticket)
        assert document["audit_chain"]["holds"] is False and payout in document["audit_chain"]["first_break"]


@pytest.mark.parametrize(("column", "value"), [("user_id", "mallory"), ("purpose", "a new car")])
async def test_a_payout_whose_payee_or_purpose_differs_from_its_paid_row_is_named(desk, db_url, column, value):
    found = await _paid(desk.ledger)
    await _sql(found.ledger, f"UPDATE approval_payouts SET {column} = :v WHERE id = :p", v=value, p=found.payout)

    [named] = await _named(found.ledger, "approval_payouts")

    assert named.key == found.payout and named.what.startswith(f"{column} is ")


async def test_a_payout_moved_to_another_ticket_is_named_by_both_chains(desk, db_url):
    found = await _paid(desk.ledger)
    await _sql(found.ledger, "UPDATE approval_payouts SET ticket_id = :t WHERE id = :p", t=found.pending_ticket,
               p=found.payout)

    named = await _named(found.ledger, "approval_payouts")

    assert sorted(broken.ticket_id for broken in named) == sorted([found.paid_ticket, found.pending_ticket])
    assert {broken.key for broken in named} == {found.payout}


async def test_a_payout_added_without_a_ticket_or_a_chain_is_named(desk, db_url):
    found = await _paid(desk.ledger)
    await _sql(found.ledger, "INSERT INTO approval_payouts (id, ticket_id, app_name, call_id, user_id, session_id, "
                             "purpose, amount_cents, paid_at) VALUES ('P-added', NULL, 'long_running_agent', 'adk-x', "
                             "'mallory', 's-9', 'consulting', 900000, :at)", at=found.ledger.now())

    [named] = await _named(found.ledger, "approval_payouts")

    assert named.key == "P-added" and "no audit chain states it" in named.what


async def test_a_paid_row_whose_payout_is_gone_is_named(desk, db_url):
    found = await _paid(desk.ledger)
    await _sql(found.ledger, "DELETE FROM approval_payouts WHERE id = :p", p=found.payout)

    [named] = await _named(found.ledger, "approval_payouts")

    assert (named.key, named.ticket_id) == (found.payout, found.paid_ticket) and "not in the ledger" in named.what


@pytest.mark.parametrize(("column", "value"), [("amount_cents", 900000), ("user_id", "mallory"),
                                                ("purpose", "a new car"), ("approvals_needed", 0)])
async def test_a_ticket_whose_request_differs_from_its_requested_row_is_named(desk, db_url, column, value):
    found = await _paid(desk.ledger)
    await _sql(found.ledger, f"UPDATE approval_tickets SET {column} = :v WHERE id = :t", v=value,
               t=found.pending_ticket)

    [named] = await _named(found.ledger, "approval_tickets")

    assert named.key == found.pending_ticket and named.what.startswith(f"{column} is ")
    assert "as its requested row" in named.what


@pytest.mark.parametrize(("ticket", "status", "said"), [
    ("pending_ticket", "approved", "but its chain holds no decision: pending"),
    ("paid_ticket", "rejected", "not approved as its chain's decision")])
async def test_a_ticket_whose_status_is_not_its_chains_last_decision_is_named(desk, db_url, ticket, status, said):
    found = await _paid(desk.ledger)
    await _sql(found.ledger, "UPDATE approval_tickets SET status = :s WHERE id = :t", s=status,
               t=getattr(found, ticket))

    [named] = await _named(found.ledger, "approval_tickets")

    assert named.key == getattr(found, ticket) and f"status is {status}, {said}" in named.what


async def test_what_a_chain_states_first_holds_against_a_row_added_after_it(desk, db_url):
    found = await _paid(desk.ledger)
    ledger = found.ledger
    async with ledger.engine.connect() as db:
        paid = (await db.execute(select(AuditRow.at, AuditRow.facts).where(AuditRow.ticket_id == found.paid_ticket,
                                                                           AuditRow.action == "paid"))).one()
        seq, head_hash = (await db.execute(text("SELECT audit_seq, audit_head FROM approval_tickets WHERE id = :t"),
                                           {"t": found.paid_ticket})).one()
    # Someone who knows the arithmetic adds a "paid" row restating the payout at $9,000, chained to the head, and
    # edits the payout to match; and a "rejected" row, with the ticket's status.
    restated = paid.facts.replace('"amount_cents":25000', '"amount_cents":900000')
    for action, facts in (("paid", restated), ("rejected", None)):
        digest = link(head_hash, content(found.paid_ticket, paid.at, "mallory", action, None, facts))
        seq += 1
        await _sql(ledger, "INSERT INTO approval_audit (ticket_id, at, actor, action, detail, facts, seq, hash) "
                           "VALUES (:t, :at, 'mallory', :action, NULL, :facts, :seq, :hash)",
                   t=found.paid_ticket, at=paid.at, action=action, facts=facts, seq=seq, hash=digest)
        head_hash = digest
    await _sql(ledger, "UPDATE approval_payouts SET amount_cents = 900000 WHERE id = :p", p=found.payout)
    await _sql(ledger, "UPDATE approval_tickets SET status = 'rejected' WHERE id = :t", t=found.paid_ticket)

    named = await _named(ledger, "approval_payouts") + await _named(ledger, "approval_tickets")

    assert [(broken.table, broken.key) for broken in named] == [
        ("approval_payouts", found.payout), ("approval_tickets", found.paid_ticket)]
    assert "not 25000 as its paid row" in named[0].what and "not approved as its chain's decision" in named[1].what


async def test_an_approved_ticket_that_lets_more_be_paid_than_its_chain_approved_is_named(desk, db_url):
    ledger = desk.ledger
    ticket = await open_ticket_for(ledger, 25_000)
    await ledger.tickets.decide(ticket.id, approver="bob", approve=True, amount="200", reason="the per diem")
    await _sql(ledger, "UPDATE approval_tickets SET approved_cents = 900000 WHERE id = :t", t=ticket.id)

    [named] = await _named(ledger, "approval_tickets")

    assert named.key == ticket.id and named.what.startswith("approved_cents is 900000: it lets more be paid than the "
                                                            "20000 its chain approved")


@pytest.mark.parametrize("change", ["channel = 'api'", """principal = '{"approver": "mallory"}'""",
                                    "approver = 'carol'", "cents = 900000"])
async def test_a_decision_whose_evidence_differs_from_its_evidence_row_is_named(desk, db_url, change):
    found = await _paid(desk.ledger)
    await _sql(found.ledger, f"UPDATE approval_decisions SET {change} WHERE ticket_id = :t", t=found.paid_ticket)
    async with found.ledger.engine.connect() as db:
        decision = await db.scalar(text("SELECT id FROM approval_decisions WHERE ticket_id = :t"),
                                   {"t": found.paid_ticket})

    [named] = await _named(found.ledger, "approval_decisions")

    assert (named.key, named.ticket_id) == (decision, found.paid_ticket)
    assert named.what.startswith(change.split(" ")[0] + " is ")


async def test_an_evidence_row_whose_decision_is_gone_is_named(desk, db_url):
    found = await _paid(desk.ledger)
    await _sql(found.ledger, "DELETE FROM approval_decisions WHERE ticket_id = :t", t=found.paid_ticket)

    verdict = await verify(found.ledger.database)

    [named] = verdict.breaks
    assert named.ticket_id == found.paid_ticket and "not in approval_decisions" in named.what


async def test_every_payout_chain_is_anchored_and_checked_against_its_anchor(desk, db_url):
    found = await _paid(desk.ledger)
    anchored = await heads(found.ledger.database)
    assert found.small_payout in {h.ticket_id for h in anchored}
    for table, column in (("approval_audit", "ticket_id"), ("auto_approved_payouts", "payout_id"),
                          ("approval_payouts", "id")):
        await _sql(found.ledger, f"DELETE FROM {table} WHERE {column} = :p", p=found.small_payout)

    [named] = (await verify(found.ledger.database, anchors=anchored)).breaks

    assert named.ticket_id == found.small_payout and "not in the ledger" in named.what


async def test_payouts_without_approval_from_several_engines_each_get_one_chain_that_holds(desk, db_url):
    ledgers = [Ledger(db_url) for _ in range(4)]  # each its own engine and connections, as another process has
    try:
        for ledger in ledgers:
            await (await ledger.database.session()).close()  # the schema once, before the race

        async def pay(ledger: Ledger, call: int) -> str:
            payout, _ = await ledger.payouts.pay_small(
                conversation=Conversation("long_running_agent", "alice", "s-race"), call_id=f"call-{call}",
                purpose=f"item {call}", amount_cents=1_000, requester="alice", purpose_key=f"item {call}",
                daily_limit_cents=1_000_000)
            return payout.id

        # Every engine pays calls 0 to 7: each call is paid once, the others report that payout.
        paid = await asyncio.gather(*(pay(ledger, call) for call in range(8) for ledger in ledgers))
    finally:
        for ledger in ledgers:
            await ledger.close()

    verdict = await verify(desk.ledger.database)
    assert verdict.holds, verdict.breaks
    assert (verdict.chains, verdict.rows) == (8, 8)
    assert sorted(h.ticket_id for h in await heads(desk.ledger.database) if h.seq == 1) == sorted(set(paid))


# The probe: what each SQL statement does, and the row `verify --anchor` must name for it.
PROBES = {
    "a paid ticket's payout amount": (
        "UPDATE approval_payouts SET amount_cents = 900000 WHERE ticket_id = :paid", "approval_payouts {payout}"),
    "a ticket's amount": (
        "UPDATE approval_tickets SET amount_cents = 900000 WHERE id = :pending", "approval_tickets {pending}"),
    "a pending ticket's status set to approved": (
        "UPDATE approval_tickets SET status = 'approved' WHERE id = :pending", "approval_tickets {pending}"),
    "an evidence row's channel and principal": (
        """UPDATE approval_decisions SET channel = 'api', principal = '{"approver": "carol"}' """
        "WHERE ticket_id = :paid",
        "approval_decisions {decision}"),
    "a payout row with no ticket added": (
        "INSERT INTO approval_payouts (id, ticket_id, app_name, call_id, user_id, session_id, purpose, amount_cents, "
        "paid_at) SELECT 'P-added', NULL, app_name, 'adk-x', user_id, session_id, purpose, 900000, paid_at "
        "FROM approval_payouts WHERE ticket_id = :paid", "approval_payouts P-added"),
}


@pytest.mark.parametrize("probe", PROBES)
async def test_the_probe_edits_a_table_after_the_heads_were_anchored_and_verify_names_the_row(desk, db_url, tmp_path,
                                                                                              probe):
    def expenses(*args: str) -> Any:  # the CLI's main(argv), in a thread of its own: it runs its own event loop
        return asyncio.to_thread(cli.expenses, *args, url=db_url)

    paid = await asyncio.to_thread(cli.request_ticket, db_url)
    assert (await expenses("approve", paid, "--approver", "bob")).returncode == 0
    pending = await asyncio.to_thread(cli.request_ticket, db_url, "Please reimburse $300 for the hotel")
    small = await expenses("request", "Please reimburse $42.50 for the taxi to the airport", "--user", "alice")
    assert "was paid" in small.stdout, small.stdout
    anchor = tmp_path / "heads.txt"
    anchor.write_text((await expenses("audit", "head")).stdout)
    assert (await expenses("audit", "verify", "--anchor", str(anchor))).returncode == 0
    ledger = desk.ledger
    [payout] = [p.id for p in await ledger.payouts.find(ticket_id=paid)]
    async with ledger.engine.connect() as db:
        decision = await db.scalar(text("SELECT id FROM approval_decisions WHERE ticket_id = :t"), {"t": paid})

    statement, row = PROBES[probe]
    await _sql(ledger, statement, **{name: value for name, value in {"paid": paid, "pending": pending}.items()
                                     if f":{name}" in statement})
    broken = await expenses("audit", "verify", "--anchor", str(anchor))

    assert broken.returncode == 1, broken.stdout
    named = row.format(payout=payout, pending=pending, decision=decision)
    assert re.search(rf"^broken: {re.escape(named)}: ", broken.stderr, re.M), broken.stderr
