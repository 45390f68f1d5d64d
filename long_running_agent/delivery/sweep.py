"""What is due: expiries, decisions owed to their conversations, and reminders.

`make web`'s sweep runs it on a timer, and each approver command once before its own work. Only a ticket to deliver
or to remind of loads the courier, and ADK with it: a command on a ledger with nothing due starts without them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from ..ledger import Ticket, TicketStatus

if TYPE_CHECKING:
    from ..desk import Desk
    from .courier import Delivery


async def deliver_due(desk: Desk, *, actor: str, grace: timedelta = timedelta(seconds=30)) -> list[Delivery]:
    """Expire overdue tickets; deliver expiries, and decisions whose delivery never finished once `grace` passed.

    A delivery that failed with a reason is left to the requester's next message or an approver, not retried in a loop.
    """
    ledger = desk.ledger
    if expired := await ledger.tickets.expire_due():
        desk.watch.tell("ledger.expire", outcome="expired", channel="sweep", count=len(expired))
    cutoff = ledger.now() - grace
    # A decision still inside `grace` is most likely being delivered by its approver's own request.
    owed = [ticket for ticket in await ledger.deliveries.undelivered() if not ticket.delivery_error and (
        ticket.status is TicketStatus.EXPIRED or not ticket.decided_at or ticket.decided_at <= cutoff)]
    if not owed:
        return []
    from .courier import Courier

    courier = Courier(desk)
    return [await courier.deliver(ticket.id, actor=actor, wait=timedelta(seconds=1)) for ticket in owed]


async def remind_due(desk: Desk) -> list[Ticket]:
    """Remind of each pending ticket about to expire, once, and escalate it; tell its conversation.

    Reminders are notifications: nothing to do without a webhook.
    """
    config = desk.settings
    if config.remind_before is None or config.webhook_url is None:
        return []
    reminded = await desk.ledger.tickets.remind_due(config.remind_before, config.escalate_to)
    if not reminded:
        return []
    from .courier import Courier

    courier = Courier(desk)
    for ticket in reminded:
        escalated = f" It was escalated to {ticket.escalated_to.replace(',', ', ')}." if ticket.escalated_to else ""
        await courier.tell(ticket, f"Ticket {ticket.id} still waits for an approver; the approvers were "
                                    f"reminded that it expires at {ticket.expires_at:%Y-%m-%d %H:%M} UTC.{escalated}")
    return reminded
