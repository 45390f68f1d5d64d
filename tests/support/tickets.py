"""Tickets made straight in the ledger, for tests that need many of them, or old decisions.

They have no conversation behind them (nobody asked in a chat), which is all
a list needs; a test that delivers a decision asks over /run instead.
"""

from __future__ import annotations

from datetime import timedelta

from long_running_agent.ledger import Ledger, Ticket

APP = "long_running_agent"


async def open_tickets(ledger: Ledger, count: int, prefix: str = "listed", user: str = "dave") -> list[Ticket]:
    """`count` pending tickets, oldest first, each in its own (absent) conversation."""
    return [
        await ledger.open_ticket(
            app_name=APP, user_id=user, session_id=f"{prefix}-{n}", call_id="adk-1",
            call_name="ask_for_approval", purpose=f"{prefix} {n}", amount_cents=20000 + n, ttl=timedelta(days=3),
        )
        for n in range(count)
    ]


async def decide_and_mark_delivered(ledger: Ledger, count: int, prefix: str = "recent") -> list[Ticket]:
    """`count` decisions that reached their conversations: they fill "recent decisions"."""
    decided = []
    for ticket in await open_tickets(ledger, count, prefix):
        decided.append(await ledger.decide(ticket.id, approver="carol", approve=True))
        await ledger.mark_delivered(ticket.id, actor="carol")
    return decided


async def decided_not_delivered(ledger: Ledger, ticket_id: str, why: str) -> Ticket:
    """Approve `ticket_id` in the ledger only, as a process would that failed before delivering."""
    await ledger.decide(ticket_id, approver="bob", approve=True)
    await ledger.mark_undelivered(ticket_id, actor="bob", error=why)
    return await ledger.get(ticket_id)
