"""The money invariants, stated once, read from the ledger's tables.

Every test that drives the ledger through random or racing sequences checks
these after each step (tests/test_money_invariants.py):

1. at most one payout per ticket;
2. a payout, and what an approved ticket will pay, is at most every approving
   approver's amount, and that at most the amount asked;
3. nothing is paid without the required number of distinct approvers, all of
   them configured and none of them the requester;
4. a rejected, withdrawn or expired ticket never pays;
5. every approved ticket is paid, can still be delivered, or has a recorded
   failed delivery that `settle` accepts;
6. split requests: the payouts of one-approver tickets of one requester on one
   UTC day, whatever their purposes, or from one message, add up to at most
   the two-person line;
7. the pending count the database keeps (the inbox's total) is the number of
   pending tickets.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC

from sqlalchemy import func, select

from long_running_agent.ledger import Ledger, TicketStatus
from long_running_agent.ledger.policy import requester_of
from long_running_agent.ledger.schema import PayoutRow, PendingCountRow, TicketRow


@dataclass
class Approvals:
    """What each approval that the ledger accepted approved: (approver, cents), per ticket."""

    given: dict[str, list[tuple[str, int]]] = field(default_factory=lambda: defaultdict(list))

    def record(self, ticket_id: str, approver: str, cents: int) -> None:
        self.given[ticket_id].append((approver, cents))


async def check_money_invariants(
    ledger: Ledger, *, approvals: Approvals, approvers: frozenset[str], dual_above_cents: int
) -> None:
    async with await ledger.database.session() as db:
        tickets = {row.id: row for row in await db.scalars(select(TicketRow))}
        payouts = list(await db.scalars(select(PayoutRow).where(PayoutRow.ticket_id.is_not(None))))
        kept_pending = int(await db.scalar(select(func.coalesce(func.sum(PendingCountRow.pending), 0))) or 0)
    pending = sum(1 for row in tickets.values() if TicketStatus(row.status) is TicketStatus.PENDING)
    assert kept_pending == pending, f"the kept pending count is {kept_pending}, with {pending} tickets pending"
    paid: dict[str, list[PayoutRow]] = defaultdict(list)
    for payout in payouts:
        paid[payout.ticket_id or ""].append(payout)

    single_approver_paid: dict[tuple[str, object, str], int] = defaultdict(int)
    for ticket_id, row in tickets.items():
        ticket_payouts = paid.get(ticket_id, [])
        status = TicketStatus(row.status)
        assert len(ticket_payouts) <= 1, f"{ticket_id} was paid {len(ticket_payouts)} times"
        if status is not TicketStatus.APPROVED:
            assert not ticket_payouts, f"{ticket_id} is {status} and was paid"
        if row.amount_cents > dual_above_cents:
            assert row.approvals_needed == 2, f"{ticket_id} asks for more than the line with one approver"
        given = approvals.given.get(ticket_id, [])
        if status is TicketStatus.PENDING:
            assert [name for name, _ in given] == ([row.first_approved_by] if row.first_approved_by else []), (
                ticket_id, given, row.first_approved_by)
        if status is TicketStatus.APPROVED:
            deciders = [row.first_approved_by, row.decided_by] if row.approvals_needed == 2 else [row.decided_by]
            assert len(given) == row.approvals_needed, f"{ticket_id}: {given} for {row.approvals_needed}"
            assert sorted(deciders) == sorted(name for name, _ in given), (ticket_id, deciders, given)
            assert len(set(deciders)) == row.approvals_needed, f"{ticket_id} approved twice by one person"
            assert set(deciders) <= approvers, f"{ticket_id} approved by {deciders}"
            assert requester_of(row.user_id) not in deciders, f"{ticket_id} approved by its requester"
            payable = row.amount_cents if row.approved_cents is None else row.approved_cents
            assert payable <= min(cents for _, cents in given), f"{ticket_id} would pay more than {given}"
            if not ticket_payouts:
                # Unpaid: still deliverable (no attempt failed), or settleable (one did).
                assert row.settled_at is None, f"{ticket_id} was settled without its payout"
                assert row.delivered_at is None, f"{ticket_id} was delivered and never paid"
        for payout in ticket_payouts:
            assert payout.amount_cents <= row.amount_cents, f"{ticket_id} paid more than was asked"
            for approver, cents in given:
                assert payout.amount_cents <= cents, f"{ticket_id} paid more than {approver} approved"
            if row.approvals_needed == 1:
                day = _utc_day(row)
                single_approver_paid[(requester_of(row.user_id), day, "requester")] += payout.amount_cents
                for group in (row.request_groups or "").splitlines():
                    if group.startswith("message:"):
                        single_approver_paid[(row.user_id, day, group)] += payout.amount_cents
    for group, total in single_approver_paid.items():
        assert total <= dual_above_cents, f"{group}: {total} cents paid on one approver's word each"


def _utc_day(row: TicketRow) -> object:
    created = row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=UTC)
    return created.astimezone(UTC).date()
