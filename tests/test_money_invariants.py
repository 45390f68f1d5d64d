"""The money invariants (tests/support/invariants.py), searched by machine on SQLite and PostgreSQL.

A Hypothesis state machine drives the ledger through random sequences of
requests, approvals (with and without an amount), rejections, withdrawals,
expiries, deliveries (some whose run ends without paying), failed deliveries,
settlements and stray `reimburse` calls, by two requesters and three configured
approvers (one of whom also asks) under a policy of groups (finance, and above
the line finance and cfo), on two connections; some steps run two operations on
the same ticket at the same moment, one on each connection. After every step it checks the
invariants. Then every pair of decision operations is raced, many times.

`make test` runs a bounded search; `INVARIANT_EXAMPLES=2000 .venv/bin/python -m
pytest tests/test_money_invariants.py` searches longer (docs/testing.md).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
)
from support.clock import FakeClock
from support.invariants import APPROVED, EXAMPLES, FIRST_APPROVAL, Decision, Record, check_money_invariants, run_search
from support.models import empty
from support.postgres import new_postgres_database

from long_running_agent.ledger import Conversation, Ledger, LedgerError, Ticket, TicketExpired, TicketStatus, tickets
from long_running_agent.ledger.inputs import InputError
from long_running_agent.ledger.need import EVERYONE
from long_running_agent.ledger.policy.rules import Policy, Rules, Tier
from long_running_agent.ledger.tickets import row_of

APP = "long_running_agent"
# The policy as data: one approver from finance, or above the line one from finance and one from cfo; dave is in
# both groups, so bob and carol (finance only) cannot approve above the line together.
APPROVERS = {"bob": frozenset({"finance"}), "carol": frozenset({"finance"}), "dave": frozenset({"finance", "cfo"})}
NEEDS = {1: {"finance": 1}, 2: {"finance": 1, "cfo": 1}}
REQUESTERS = ("alice", "bob")
DUAL_ABOVE = 500_000  # $5,000, DUAL_APPROVAL_ABOVE's default
AMOUNTS = (20_000, 150_000, 300_000, 450_000, 600_000)
PURPOSES = ("server", "the server", "laptop")
MESSAGES = (None, "message-1", "message-2")
# Share of the amount asked that an approver approves; None approves it as asked.
SHARES = (None, 0.9, 0.5)
# 20:00 UTC, so that a few hours later is another day for the daily totals.
START = datetime(2026, 6, 1, 20, 0, tzinfo=UTC)
TTL = timedelta(hours=72)


class Money:
    """The ledger under test on two connections, and the record of what the test asked and the ledger accepted."""

    def __init__(self, url: str) -> None:
        self.clock = FakeClock(START)
        rules = Rules(tuple(Tier(Decimal(line), tuple(NEEDS[n].items())) for n, line in ((1, 100), (2, 5000))),
                      {name: groups | {EVERYONE} for name, groups in APPROVERS.items()})
        self.ledgers = [Ledger(url, clock=self.clock, policy=Policy(rules=rules)) for _ in range(2)]
        self.record = Record(APPROVERS, DUAL_ABOVE, NEEDS)
        self.calls = itertools.count()

    async def start_afresh(self) -> None:
        """Empty tables, the clock back at the start: for the next sequence, on the same connections."""
        await empty(self.ledgers[0])
        self.clock.now = START
        self.record = Record(APPROVERS, DUAL_ABOVE, NEEDS)

    async def check(self) -> None:
        await check_money_invariants(self.ledgers[0], self.record)

    async def close(self) -> None:
        for ledger in self.ledgers:
            await ledger.close()

    async def request(self, requester: str, purpose: str, cents: int, message: str | None) -> Ticket:
        ticket = await self.ledgers[0].tickets.open(
            app_name=APP, user_id=requester, session_id=f"chat-{requester}", call_id=f"call-{next(self.calls)}",
            call_name="ask_for_approval", purpose=purpose, amount_cents=cents, ttl=TTL, message_id=message,
        )
        self.record.request(ticket.id, requester, self.clock(), self.clock(), cents, TTL, message)
        return ticket

    def accepted(self, ticket_id: str, action: str, actor: str, cents: int | None = None) -> None:
        self.record.accepted(Decision(ticket_id, action, actor, self.clock(), self.clock(), cents))

    async def deciding(self, work: Awaitable[Ticket]) -> Ticket:
        """Run a decision; one refused because the ticket's window ended expired it, and is recorded so."""
        try:
            return await work
        except TicketExpired as expired:
            self.accepted(expired.ticket_id, "expired", "system")
            raise

    # --- what can happen to a ticket; each refusal is a LedgerError or an InputError -----------------

    async def approve(self, n: int, ticket_id: str, approver: str, share: float | None) -> None:
        cents = None if share is None else max(1, int(self.record.requests[ticket_id].cents * share))
        amount = None if cents is None else f"{cents // 100}.{cents % 100:02d}"
        decided = await self.deciding(self.ledgers[n].tickets.decide(
            ticket_id, approver=approver, approve=True, amount=amount,
            reason="within budget" if share is not None else None))
        self.accepted(ticket_id, APPROVED if decided.status is TicketStatus.APPROVED else FIRST_APPROVAL,
                      approver, cents)

    async def reject(self, n: int, ticket_id: str, approver: str) -> None:
        await self.deciding(self.ledgers[n].tickets.decide(ticket_id, approver=approver, approve=False,
                                                           reason="not in the budget"))
        self.accepted(ticket_id, "rejected", approver)

    async def withdraw(self, n: int, ticket_id: str, who: str) -> None:
        await self.deciding(self.ledgers[n].tickets.withdraw(ticket_id, requester=who))
        self.accepted(ticket_id, "withdrawn", who)

    async def expire_due(self, n: int) -> None:
        for ticket_id in await self.ledgers[n].tickets.expire_due():
            self.accepted(ticket_id, "expired", "system")

    async def deliver(self, n: int, ticket_id: str, *, pays: bool = True) -> None:
        """A run delivering a decision, as the courier's: it holds the conversation, the agent's `reimburse` pays an
        approval (unless `pays` is False: the model never called it, or called it wrongly), and the lock's release
        records the delivery, as every run's does (ledger/storage/locks.py)."""
        ledger = self.ledgers[n]
        ticket = await ledger.tickets.get(ticket_id)
        if ticket.status is TicketStatus.PENDING or ticket.delivered_at or ticket.settled_at:
            return
        async with ledger.locks.hold(ticket.conversation, purpose=f"delivering {ticket_id}") as run:
            if pays and ticket.status is TicketStatus.APPROVED:
                await ledger.payouts.pay_approved(conversation=ticket.conversation, call_id=f"call-{next(self.calls)}",
                                                  purpose=ticket.purpose, amount_cents=ticket.payable_cents,
                                                  prefer=[ticket])
            run.deliveries.append(ticket_id)

    async def fail_delivery(self, n: int, ticket_id: str) -> None:
        ticket = await self.ledgers[n].tickets.get(ticket_id)
        if ticket.status is not TicketStatus.PENDING:
            await self.ledgers[n].deliveries.mark_undelivered(ticket_id, actor="test", error="the conversation is gone")

    async def settle(self, n: int, ticket_id: str, approver: str) -> None:
        await self.ledgers[n].deliveries.settle(ticket_id, approver=approver)

    async def reimburse(self, n: int, requester: str, purpose: str, cents: int) -> None:
        """The model calls `reimburse` with whatever it likes, in a requester's conversation."""
        await self.ledgers[n].payouts.pay_approved(conversation=Conversation(APP, requester, f"chat-{requester}"),
                                           call_id=f"call-{next(self.calls)}", purpose=purpose, amount_cents=cents)


async def refused(work: Awaitable[Any]) -> None:
    """Run one operation; the ledger refusing it is an outcome like any other."""
    try:
        await work
    except (LedgerError, InputError):
        pass


# What two people can do to one ticket at the same moment.
def decisions(money: Money, ticket_id: str, requester: str) -> dict[str, Callable[[int, str], Awaitable[None]]]:
    return {
        "approve": lambda n, who: money.approve(n, ticket_id, who, None),
        "approve less": lambda n, who: money.approve(n, ticket_id, who, 0.5 if n else 0.9),
        "reject": lambda n, who: money.reject(n, ticket_id, who),
        "withdraw": lambda n, _who: money.withdraw(n, ticket_id, requester),
        "expire": lambda n, _who: money.expire_due(n),
        "deliver": lambda n, _who: money.deliver(n, ticket_id),
        "deliver unpaid": lambda n, _who: money.deliver(n, ticket_id, pays=False),
        "fail delivery": lambda n, _who: money.fail_delivery(n, ticket_id),
        "settle": lambda n, who: money.settle(n, ticket_id, who),
    }


async def at_once(money: Money, ticket_id: str, requester: str, pair: tuple[str, str], who: list[str]) -> None:
    """Two operations on one ticket at the same moment, one on each connection."""
    ops = decisions(money, ticket_id, requester)
    await asyncio.gather(refused(ops[pair[0]](0, who[0])), refused(ops[pair[1]](1, who[1])))


OPERATIONS = ("approve", "approve less", "reject", "withdraw", "expire", "deliver", "deliver unpaid", "fail delivery",
              "settle")


class LedgerMachine(RuleBasedStateMachine):
    # One event loop and one Money per database, kept across the sequences of a search (set by `search`).
    loop: asyncio.AbstractEventLoop
    money: Money

    def __init__(self) -> None:
        super().__init__()
        self.requesters: dict[str, str] = {}
        self.run(self.money.start_afresh())

    def run(self, work: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(work)

    tickets = Bundle("tickets")

    @initialize(target=tickets, asked=st.lists(st.tuples(
        st.sampled_from(REQUESTERS), st.sampled_from(PURPOSES), st.sampled_from(AMOUNTS), st.sampled_from(MESSAGES)),
        min_size=1, max_size=3))
    def open_some(self, asked: list[tuple[str, str, int, str | None]]) -> MultipleResults[str]:
        """Every sequence starts with a few requests, so its steps have tickets to act on."""
        return multiple(*(self.request(*one) for one in asked))

    @rule(target=tickets, requester=st.sampled_from(REQUESTERS), purpose=st.sampled_from(PURPOSES),
          cents=st.sampled_from(AMOUNTS), message=st.sampled_from(MESSAGES))
    def request(self, requester: str, purpose: str, cents: int, message: str | None) -> str:
        ticket = self.run(self.money.request(requester, purpose, cents, message))
        self.requesters[ticket.id] = requester
        return ticket.id

    @rule(target=tickets, ticket=tickets, cents=st.sampled_from(AMOUNTS))
    def ask_again_in_its_message(self, ticket: str, cents: int) -> str:
        """Another call of a ticket's turn, by its requester, in its message (a new one if it had none), whatever
        the clock says now: a turn's calls may fall either side of midnight."""
        asked = self.money.record.requests[ticket]
        return self.request(asked.requester, "the rest of it", cents, asked.message or f"message-of-{ticket}")

    @rule(ticket=tickets, approver=st.sampled_from(sorted(APPROVERS) + ["mallory"]),
          share=st.sampled_from(SHARES), n=st.integers(0, 1))
    def approve(self, ticket: str, approver: str, share: float | None, n: int) -> None:
        self.run(refused(self.money.approve(n, ticket, approver, share)))

    @rule(ticket=tickets, approvers=st.permutations(sorted(APPROVERS)), shares=st.tuples(
        st.sampled_from(SHARES), st.sampled_from(SHARES)), deliver=st.booleans())
    def approvers_agree(self, ticket: str, approvers: list[str], shares: tuple[float | None, ...],
                        deliver: bool) -> None:
        """The usual course, so that sequences reach payouts: two approvers approve it, then it is delivered."""
        for approver, share in zip(approvers, shares, strict=False):
            self.run(refused(self.money.approve(0, ticket, approver, share)))
        if deliver:
            self.run(refused(self.money.deliver(1, ticket)))

    @rule(ticket=tickets, approver=st.sampled_from(sorted(APPROVERS)))
    def reject(self, ticket: str, approver: str) -> None:
        self.run(refused(self.money.reject(0, ticket, approver)))

    @rule(ticket=tickets, by_requester=st.booleans())
    def withdraw(self, ticket: str, by_requester: bool) -> None:
        who = self.requesters[ticket] if by_requester else "carol"
        self.run(refused(self.money.withdraw(0, ticket, who)))

    @rule(hours=st.sampled_from((1, 5, 30, 80)), sweep=st.booleans())
    def time_passes(self, hours: int, sweep: bool) -> None:
        """Time passes; the sweep may not have run yet when the next decision comes in."""
        self.money.clock.advance(hours=hours)
        if sweep:
            self.run(refused(self.money.expire_due(0)))

    @rule(ticket=tickets, pays=st.booleans())
    def deliver(self, ticket: str, pays: bool) -> None:
        self.run(refused(self.money.deliver(0, ticket, pays=pays)))

    @rule(ticket=tickets)
    def delivery_fails(self, ticket: str) -> None:
        self.run(refused(self.money.fail_delivery(0, ticket)))

    @rule(ticket=tickets, approver=st.sampled_from(sorted(APPROVERS) + ["alice"]))
    def settle(self, ticket: str, approver: str) -> None:
        self.run(refused(self.money.settle(0, ticket, approver)))

    @rule(requester=st.sampled_from(REQUESTERS), purpose=st.sampled_from(PURPOSES),
          cents=st.sampled_from(AMOUNTS + (450_000 // 2, 405_000)))
    def stray_reimburse(self, requester: str, purpose: str, cents: int) -> None:
        self.run(refused(self.money.reimburse(1, requester, purpose, cents)))

    @rule(ticket=tickets, first=st.sampled_from(OPERATIONS), second=st.sampled_from(OPERATIONS),
          approvers=st.permutations(sorted(APPROVERS)))
    def at_once(self, ticket: str, first: str, second: str, approvers: list[str]) -> None:
        self.run(at_once(self.money, ticket, self.requesters[ticket], (first, second), approvers))

    @invariant()
    def money_is_kept(self) -> None:
        self.run(self.money.check())


def search(url: str) -> None:
    money = Money(url)
    run_search(LedgerMachine, EXAMPLES, 40, asyncio.new_event_loop(), [money], money=money)


def test_no_sequence_breaks_the_money_invariants_on_sqlite(tmp_path):
    search(f"sqlite+aiosqlite:///{tmp_path}/invariants.db")


@pytest.mark.postgres
def test_no_sequence_breaks_the_money_invariants_on_postgresql(postgres_admin_url):
    search(new_postgres_database(postgres_admin_url))


async def ticket_in_state(money: Money, state: int, round_: int) -> Ticket:
    """A ticket for a race: pending for one approver, or two (none or one given yet), or approved but undelivered."""
    cents = (20_000, 600_000, 600_000, 300_000)[state]
    # A requester of its own each round: all of one requester's day adds up toward the two-person line.
    ticket = await money.request(f"alice{round_}", f"race {round_}", cents, None)
    if state == 2:
        await money.approve(0, ticket.id, "dave", 0.9)
    if state == 3:
        await money.approve(0, ticket.id, "dave", None)
        await money.fail_delivery(0, ticket.id)
    return ticket


@pytest.mark.parametrize("pair", [("approve", "approve"), ("approve less", "approve less"),
                                  ("approve", "approve less")],
                         ids=lambda pair: "+".join(pair).replace(" ", "_"))
@pytest.mark.parametrize("lands_last", ["bob", "dave"])
async def test_two_approvals_that_read_the_ticket_before_either_lands_both_count(db_url, monkeypatch, pair,
                                                                                 lands_last):
    """The race the pairs below leave to the scheduler, made certain: each approval reads the ticket, then waits
    for the other's read, and one lands after the other. The one that lands second finds the ticket changed since it
    read it and is judged again (docs/policy.md): it counts too, unless it approves more than the first approved."""
    money = Money(db_url)
    try:
        ticket = await ticket_in_state(money, 1, 0)  # two approvals needed, none given yet
        both_read, reads = asyncio.Barrier(2), itertools.count(1)
        # bob decides on the first connection, dave on the second (`at_once`).
        late = money.ledgers[0 if lands_last == "bob" else 1].engine.sync_engine

        async def read_then_wait(db: Any, ticket_id: str) -> Any:
            row = await row_of(db, ticket_id)
            if next(reads) <= 2:  # each decision's first read; a decision judged again reads at once
                await both_read.wait()
                if db.sync_engine is late:
                    await asyncio.sleep(0.2)  # the other approval lands meanwhile
            return row

        monkeypatch.setattr(tickets, "row_of", read_then_wait)
        # bob counts for finance, dave for the cfo (or finance): together they complete the need.
        await at_once(money, ticket.id, ticket.user_id, pair, ["bob", "dave"])

        share = {"bob": 0.9 if pair[0] == "approve less" else None, "dave": 0.5 if pair[1] == "approve less" else None}
        first = "dave" if lands_last == "bob" else "bob"
        given_first, given_last = share[first], share[lands_last]
        more = given_first is not None and given_last is not None and given_last > given_first
        decided = await money.ledgers[0].tickets.get(ticket.id)
        assert (decided.status, set(decided.counted_for)) == (
            (TicketStatus.PENDING, {first}) if more else (TicketStatus.APPROVED, {"bob", "dave"}))
        await money.check()
    finally:
        await money.close()


@pytest.mark.parametrize("pair", list(itertools.combinations_with_replacement(OPERATIONS, 2)),
                         ids=lambda pair: "+".join(pair).replace(" ", "_"))
async def test_two_operations_racing_on_one_ticket_keep_the_invariants(db_url, pair):
    money = Money(db_url)
    try:
        for round_ in range(8):
            state = round_ % 4
            ticket = await ticket_in_state(money, state, round_)
            if "expire" in pair and round_ % 8 >= 4:
                money.clock.now = money.record.requests[ticket.id].window_ends[0]  # as the decision comes in
            await at_once(money, ticket.id, ticket.user_id, pair, ["bob", "carol"])
            await money.check()
            money.clock.now = START
    finally:
        await money.close()
