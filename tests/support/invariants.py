"""The money invariants, stated once, judged against what the test asked for and what the ledger accepted.

A test keeps a `Record` of what it did: each request (who asked, on which UTC day, how much, when, and how many
approvers the two-person rule gives it, worked out from the record's earlier requests), and each decision the
ledger accepted (who approved which amount, or rejected, withdrew or expired which ticket, and when the call ran).
`check_money_invariants` reads the ledger's tickets, payouts and kept pending count, and judges them against that
record alone, never against the rest of what the ledger wrote (its running totals, a ticket's groups):

1. at most one payout per ticket;
2. a ticket pays the smallest amount its accepted approvals approved (one without an amount approves the amount
   asked), and an approved ticket not yet paid will pay that;
3. a ticket is approved only by as many approvals as its tier needs (the two-person rule's two tiers, or the
   policy's groups), each accepted from a configured approver who is not the requester and is in a group the tier
   needs, no approver twice, and the approvers can fill every place of the need, each in a group of theirs; no
   approval is accepted after a rejection;
4. a ticket is decided once: of the approval that decides it, a rejection, a withdrawal and an expiry, at most one
   is accepted, and the ticket's status is that one's (pending without one); only an approved ticket pays;
5. the window: no approval is accepted once it has ended, no expiry before;
6. every approved ticket is paid, can still be delivered, or has a recorded failed delivery that `settle` accepts;
7. the two-person rule: a request needs two approvers exactly when, with it, what its requester asked for that UTC
   day, or in the same message whatever the day, and may still be paid (not rejected, withdrawn or expired) comes
   to more than the line; and what is paid on one approver's word to one requester for one day, or for one
   message, is at most the line;
8. the pending count the database keeps is the number of pending tickets;
9. every ticket's audit trail is one chain, unbroken, however many processes wrote it at once (audit/check.py's verify).
"""

from __future__ import annotations

import asyncio
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from itertools import permutations
from typing import Any, NamedTuple

from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test
from sqlalchemy import func, select

from long_running_agent.ledger import Ledger, TicketStatus
from long_running_agent.ledger.audit.check import verify
from long_running_agent.ledger.storage.schema import PayoutRow, PendingCountRow, TicketRow

# What an accepted decision did; an approval either decides its ticket or is the first of two.
APPROVED, FIRST_APPROVAL = "approved", "first approval"
ENDS = {APPROVED: TicketStatus.APPROVED, "rejected": TicketStatus.REJECTED, "withdrawn": TicketStatus.WITHDRAWN,
        "expired": TicketStatus.EXPIRED}


class Request(NamedTuple):
    """A request as the test made it; its window ends its TTL after the ticket opened (after the call began,
    before it returned), and `message` is ADK's invocation: the calls of one turn."""

    requester: str
    day: date
    cents: int
    window_ends: tuple[datetime, datetime]
    approvers_needed: int
    message: str | None = None


@dataclass(frozen=True)
class Decision:
    """A decision the ledger accepted: `cents` is what an approval approved; `began`/`ended` bracket the call."""

    ticket_id: str
    action: str  # APPROVED, FIRST_APPROVAL or another key of ENDS
    actor: str
    began: datetime
    ended: datetime
    cents: int | None = None


@dataclass
class Record:
    """What the test asked the ledger for, under which rules, and what the ledger accepted."""

    approvers: Mapping[str, frozenset[str]] | frozenset[str]  # name -> groups; a set of names: one group, all in it
    line_cents: int  # DUAL_APPROVAL_ABOVE, or the policy's second tier
    # What one and two approvers mean, by group: the policy's tiers; the two-person rule's by default.
    needs: dict[int, dict[str, int]] = field(default_factory=lambda: {1: {"approvers": 1}, 2: {"approvers": 2}})
    requests: dict[str, Request] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.approvers, Mapping):
            self.approvers = {name: frozenset({"approvers"}) for name in self.approvers}

    def groups(self, name: str) -> frozenset[str]:
        assert isinstance(self.approvers, Mapping)
        return self.approvers.get(name, frozenset())

    def asked(self, requester: str, day: date) -> int:
        """What `requester` asked for on `day` and may still be paid, by the record."""
        return sum(r.cents for ticket_id, r in self.requests.items()
                   if (r.requester, r.day) == (requester, day) and self.still_counts(ticket_id))

    def asked_in(self, requester: str, message: str | None) -> int:
        """What `requester` asked for in `message`, whatever the day, and may still be paid, by the record."""
        return sum(r.cents for ticket_id, r in self.requests.items()
                   if message and (r.requester, r.message) == (requester, message) and self.still_counts(ticket_id))

    def approvers_needed(self, requester: str, day: date, cents: int, message: str | None = None) -> int:
        """What the two-person rule gives a new request, from the requests recorded so far."""
        before = max(self.asked(requester, day), self.asked_in(requester, message))
        return 2 if before + cents > self.line_cents else 1

    def request(self, ticket_id: str, requester: str, began: datetime, ended: datetime, cents: int,
                ttl: timedelta, message: str | None = None) -> Request:
        """Record a request the ledger opened between `began` and `ended`; its day is the day it began (UTC)."""
        day = began.date()
        request = Request(requester, day, cents, (began + ttl, ended + ttl),
                          self.approvers_needed(requester, day, cents, message), message)
        self.requests[ticket_id] = request
        return request

    def accepted(self, decision: Decision) -> None:
        self.decisions.append(decision)

    def of(self, ticket_id: str) -> list[Decision]:
        return [d for d in self.decisions if d.ticket_id == ticket_id]

    def still_counts(self, ticket_id: str) -> bool:
        """Whether a request may still be paid: no rejection, withdrawal or expiry of it was accepted."""
        return not any(d.action in ENDS and d.action != APPROVED for d in self.of(ticket_id))


def fills(need: dict[str, int], groups: dict[str, frozenset[str]]) -> bool:
    """Whether these approvers can take every place of the need, one each, each in a group of theirs."""
    places = [group for group, count in need.items() for _ in range(count)]
    return any(all(place in groups[who] for who, place in zip(order, places, strict=False))
               for order in permutations(groups, len(places)))


async def check_money_invariants(ledger: Ledger, record: Record) -> None:
    async with await ledger.database.session() as db:
        # Core rows, not ORM objects: read after every step of the search, the ORM's cost dominated it.
        tickets = (await db.execute(select(TicketRow.__table__))).all()
        paid: dict[str, list[int]] = defaultdict(list)
        for ticket_id, cents in await db.execute(select(PayoutRow.ticket_id, PayoutRow.amount_cents)
                                                 .where(PayoutRow.ticket_id.is_not(None))):
            paid[ticket_id or ""].append(cents)
        kept_pending = int(await db.scalar(select(func.coalesce(func.sum(PendingCountRow.pending), 0))) or 0)

    one_approver_paid: dict[tuple[str, date | str], int] = defaultdict(int)
    for row in tickets:
        asked = record.requests.get(row.id)
        assert asked is not None, f"{row.id} is a ticket nobody asked for"
        assert (row.amount_cents, row.approvals_needed) == (asked.cents, asked.approvers_needed), (
            f"{row.id}: {row.amount_cents} cents for {row.approvals_needed} approvers; the record says "
            f"{asked.cents} cents for {asked.approvers_needed}")  # 7
        decisions = record.of(row.id)
        approvals = [d for d in decisions if d.action in (APPROVED, FIRST_APPROVAL)]
        names = [d.actor for d in approvals]
        assert len(set(names)) == len(names), f"{row.id} approved twice by one approver: {names}"  # 3
        assert set(names) <= set(record.approvers), f"{row.id} approved by {names}, not all approvers"
        assert asked.requester not in names, f"{row.id} approved by its requester {asked.requester}"
        need = record.needs[asked.approvers_needed]
        strangers = [name for name in names if not record.groups(name) & set(need)]
        assert not strangers, f"{row.id} approved by {strangers}, in none of the groups it needs: {need}"  # 3
        late = [d for d in approvals if d.began >= asked.window_ends[1]]
        assert not late, f"{row.id}: approvals accepted after its window ended: {late}"  # 5

        ends = [d for d in decisions if d.action in ENDS]
        assert len(ends) <= 1, f"{row.id} decided more than once: {ends}"  # 4
        status = TicketStatus(row.status)
        expected = ENDS[ends[0].action] if ends else TicketStatus.PENDING
        assert status is expected, f"{row.id} is {status.value}; what the ledger accepted makes it {expected.value}"
        if status is TicketStatus.EXPIRED:
            assert ends[0].ended >= asked.window_ends[0], f"{row.id} expired before its window ended"  # 5
        if status is TicketStatus.APPROVED:
            assert len(names) == asked.approvers_needed, (
                f"{row.id} approved by {names}; it needs {asked.approvers_needed} approvers")  # 3
            assert fills(need, {name: record.groups(name) for name in names}), (
                f"{row.id} approved by {names}, who cannot fill its need {need}")  # 3
        vetoes = [d.ended for d in decisions if d.action == "rejected"]
        after = [d for d in approvals if vetoes and d.began > min(vetoes)]
        assert not after, f"{row.id}: approvals accepted after its rejection: {after}"  # 3

        payouts = paid.get(row.id, [])
        assert len(payouts) <= 1, f"{row.id} was paid {len(payouts)} times: {payouts}"  # 1
        assert not payouts or status is TicketStatus.APPROVED, f"{row.id} is {status.value} and was paid"  # 4
        if status is TicketStatus.APPROVED:
            smallest = min(asked.cents if d.cents is None else d.cents for d in approvals)
            will_pay = payouts or [row.amount_cents if row.approved_cents is None else row.approved_cents]
            assert will_pay == [smallest], f"{row.id} pays {will_pay[0]} cents; its approvers approved {approvals}"  # 2
            if not payouts:
                # Unpaid: still deliverable (no attempt failed), or settleable (one did).  6
                assert row.settled_at is None, f"{row.id} was settled without its payout"
                assert row.delivered_at is None, f"{row.id} was delivered and never paid"
            elif len(set(names)) == 1:
                one_approver_paid[(asked.requester, asked.day)] += payouts[0]
                if asked.message:
                    one_approver_paid[(asked.requester, asked.message)] += payouts[0]
    for (requester, when), total in one_approver_paid.items():
        assert total <= record.line_cents, f"{requester} was paid {total} cents for {when} on one approver's word each"

    pending = sum(1 for row in tickets if TicketStatus(row.status) is TicketStatus.PENDING)
    assert kept_pending == pending, f"the kept pending count is {kept_pending}, with {pending} tickets pending"  # 8
    chains = await verify(ledger.database)
    assert chains.holds, f"an audit chain is broken: {chains.first}"  # 9


# How many sequences a state machine's search tries: `make test-fast` sets 10, a maintainer with time 2000.
EXAMPLES = int(os.environ.get("INVARIANT_EXAMPLES", "100"))


def run_search(machine: type[RuleBasedStateMachine], examples: int, steps: int, loop: asyncio.AbstractEventLoop,
               closing: Iterable[Any], **kept: Any) -> None:
    """Hypothesis's search of `machine`: `examples` sequences of up to `steps` steps, each on a machine that keeps
    `loop` and `kept` (its databases) across them; then each of `closing` is closed on the loop, and the loop.
    INVARIANT_SHRINK=0 reports a failing sequence as found, unshrunk: for the mutation run (.ci/mutants.py)."""
    phases = list(Phase) if os.environ.get("INVARIANT_SHRINK") != "0" else [Phase.explicit, Phase.reuse,
                                                                            Phase.generate]
    searching = settings(max_examples=examples, stateful_step_count=steps, deadline=None, phases=phases,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    try:
        run_state_machine_as_test(type("Machine", (machine,), {"loop": loop} | kept), settings=searching)
    finally:
        for used in closing:
            loop.run_until_complete(used.close())
        loop.close()
