"""Tickets made straight in the ledger, for tests that need many of them, or old decisions.

They have no conversation behind them (nobody asked in a chat), which is all
a list needs; a test that delivers a decision asks over /run instead.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal

from long_running_agent.ledger import Ledger, Ticket
from long_running_agent.ledger.need import EVERYONE
from long_running_agent.ledger.policy.rules import Rules, Tier

APP = "long_running_agent"
# Each ticket one approver's to decide, however many the requester has open.
ONE_APPROVER = Rules((Tier(Decimal(1), ((EVERYONE, 1),)),))


async def open_tickets(ledger: Ledger, count: int, prefix: str = "listed", user: str = "dave") -> list[Ticket]:
    """`count` pending tickets, oldest first, each in its own (absent) conversation."""
    return [
        await ledger.tickets.open(
            app_name=APP, user_id=user, session_id=f"{prefix}-{n}", call_id="adk-1",
            call_name="ask_for_approval", purpose=f"{prefix} {n}", amount_cents=20000 + n, ttl=timedelta(days=3),
            rules=ONE_APPROVER,
        )
        for n in range(count)
    ]


async def open_ticket_for(
    ledger: Ledger, amount_cents: int, *, user: str = "alice", purpose: str = "conference sponsorship",
    session: str = "s-1", message: str | None = None, session_store: str = "app",
) -> Ticket:
    """One pending ticket under the two-person rule's default line ($5,000), as `ask_for_approval` opens it;
    its conversation kept in `session_store` (delivery/conversations.py)."""
    return await ledger.tickets.open(
        app_name=APP, user_id=user, session_id=session, call_id=f"adk-{uuid.uuid4().hex[:8]}",
        call_name="ask_for_approval", purpose=purpose, amount_cents=amount_cents, ttl=timedelta(days=3),
        message_id=message, session_store=session_store,
    )


async def decide_and_mark_delivered(ledger: Ledger, count: int, prefix: str = "recent") -> list[Ticket]:
    """`count` decisions that reached their conversations: they fill "recent decisions"."""
    decided = []
    for ticket in await open_tickets(ledger, count, prefix):
        decided.append(await ledger.tickets.decide(ticket.id, approver="carol", approve=True))
        await pay_and_mark_delivered(ledger, decided[-1], actor="carol")
    return decided


async def pay_and_mark_delivered(ledger: Ledger, approved: Ticket, *, actor: str) -> None:
    """What the run delivering an approval does: `reimburse` pays it, and the run's end marks it delivered (an
    approval it did not pay is recorded as a failed delivery instead: ledger/deliveries.py)."""
    await ledger.payouts.pay_approved(conversation=approved.conversation, call_id=f"pay-{approved.id}",
                                      purpose=approved.purpose, amount_cents=approved.payable_cents, prefer=[approved])
    await ledger.deliveries.mark_delivered(approved.id, actor=actor)


async def decided_not_delivered(ledger: Ledger, ticket_id: str, why: str) -> Ticket:
    """Approve `ticket_id` in the ledger only, as a process would that failed before delivering."""
    await ledger.tickets.decide(ticket_id, approver="bob", approve=True)
    await ledger.deliveries.mark_undelivered(ticket_id, actor="bob", error=why)
    return await ledger.tickets.get(ticket_id)
