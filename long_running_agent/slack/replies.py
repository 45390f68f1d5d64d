"""The outbox's Slack replies, drawn when they are sent: a clicked message's update, or a reply to its clicker.

A `slack.update` shows the ticket as the ledger has it when sent, so a retry shows where it stands; an approved
ticket's waits for its payout first, so the message can say it was paid (docs/slack.md, "Never lost").
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..ledger import Ledger, Notification, TicketStatus
from ..ledger.outbox import ticket_fields
from .messages import SLACK_REPLY, Buttons, updated_message

# An approved ticket's message waits for its payout this often, and this long at most: Slack
# keeps a response_url for 30 minutes.
PAYOUT_POLL = timedelta(seconds=5)
PAYOUT_WAIT = timedelta(minutes=25)


async def reply(ledger: Ledger, notification: Notification, payload: dict[str, Any],
                buttons: Buttons | None) -> dict[str, Any] | None:
    """The Slack reply to send now; None while an approved ticket waits for its payout (PAYOUT_WAIT at most)."""
    if notification.event == SLACK_REPLY:
        return dict(payload["message"])
    ticket = await ledger.tickets.get(notification.ticket_id)
    payouts = await ledger.payouts.find(ticket_id=ticket.id)
    # Paid by its delivery, by the sweep after a crash, or by an approver settling it.
    if ticket.status is TicketStatus.APPROVED and not payouts and ledger.now() - notification.created_at < PAYOUT_WAIT:
        return None
    payout = {"id": payouts[0].id, "amount": payouts[0].amount} if payouts else None
    fields = ticket_fields(ticket) | {"requester_today": await ledger.tickets.requester_today(ticket.id)}
    return updated_message(fields, payout, buttons or Buttons(forms=True))
