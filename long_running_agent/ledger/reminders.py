"""Reminders: a pending ticket about to expire is reminded of once, and escalated to more approvers.

A conditional UPDATE marks each ticket reminded: of replicas sweeping at once one sends it, a restart none twice.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select, update

from .audit import chain
from .outbox import Outbox
from .policy.rules import DEFAULT_RULES, Rules
from .records import Ticket, TicketStatus
from .storage.database import Database
from .storage.schema import TICKET_COLUMNS, TicketRow


async def remind_due(
    database: Database, outbox: Outbox, remind_before: timedelta, escalate_to: tuple[str, ...] = (), *,
    rules: Rules = DEFAULT_RULES,
) -> list[Ticket]:
    """Remind (once) of each pending ticket that expires within `remind_before`; escalate it too. Each reminder
    says what the ticket still needs under `rules` now."""
    now = database.now()
    async with await database.session() as db:
        due = list(await db.scalars(
            select(TicketRow.id).where(TicketRow.status == TicketStatus.PENDING,
                                       TicketRow.expires_at > now, TicketRow.expires_at <= now + remind_before,
                                       TicketRow.reminded_at.is_(None))
        ))
    reminded = []
    for ticket_id in due:
        async with database.transaction() as db:
            row = (await db.execute(
                update(TicketRow)
                .where(TicketRow.id == ticket_id, TicketRow.status == TicketStatus.PENDING,
                       TicketRow.reminded_at.is_(None))
                .values(reminded_at=now, escalated_to=",".join(escalate_to) or None)
                .returning(*TICKET_COLUMNS)
            )).first()
            if row is None:
                continue
            ticket = rules.recount(Ticket.of(row))
            await chain.write(db, ticket_id, at=now, actor="system", action="reminded",
                              detail=f"it expires at {ticket.expires_at:%Y-%m-%d %H:%M} UTC")
            await outbox.add(db, "ticket.reminder", ticket, now)
            if escalate_to:
                await chain.write(db, ticket_id, at=now, actor="system", action="escalated",
                                  detail=f"to {', '.join(escalate_to)}")
                await outbox.add(db, "ticket.escalated", ticket, now)
        reminded.append(ticket)
    return reminded
