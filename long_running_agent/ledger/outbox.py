"""The notifications outbox: a webhook for each ticket event, never lost, sent by whoever is running.

A notification is written in the transaction of the change it reports (`Outbox.add`); senders (notifications.py)
claim rows through a lease, and delivery is at least once (docs/notifications.md).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from .inputs import MAX_REASON
from .records import Notification, Ticket, TicketStatus, _utc
from .storage.database import Database, new_id
from .storage.schema import NotificationRow

# Seconds before attempt n+1, after n failures: 5 s, 30 s, 2 min, 10 min, 30 min, then hourly.
BACKOFF = (5, 30, 120, 600, 1800, 3600)
# Attempts before a notification is given up as failed (about 6 hours of retries).
MAX_ATTEMPTS = 10
# How long a claim lasts: longer than one POST with its whole deadline (APPROVAL_WEBHOOK_TIMEOUT_SECONDS, at most 30).
LEASE = timedelta(seconds=60)

# The event of an A2A client's push (a2a/records.py): sent to the client's URL, with its token.
A2A_PUSH = "a2a.push"

_ADD = insert(NotificationRow)


def ticket_fields(ticket: Ticket) -> dict[str, Any]:
    """The `ticket` of a notification: the ticket as receivers see it (and Slack's messages show it)."""
    return {
        "id": ticket.id,
        "status": ticket.status.value,
        "requester": ticket.user_id,
        "purpose": ticket.purpose,
        "amount": ticket.amount,
        "approved_amount": float(ticket.payable_cents) / 100 if ticket.changed else None,
        "approvals": ticket.approvals_shown,
        # The total that made it need two approvers, when its own amount did not.
        "combined_amount": float(ticket.combined_cents) / 100 if ticket.combined_cents is not None else None,
        "approved_by": ticket.approvers,
        "decided_by": ticket.decided_by,
        "reason": ticket.reason,
        "expires_at": ticket.expires_at.isoformat(timespec="seconds"),
        "escalated_to": ticket.escalated_to.split(",") if ticket.escalated_to else [],
    } | policy_fields(ticket)


def policy_fields(ticket: Ticket) -> dict[str, Any]:
    """What the approval policy asks of the ticket (docs/policy.md): its tier and need, who counted for which group,
    whose approval no longer counts (its approver left the group), and what is still missing ("1 of 2: needs 1 more
    from cfo", while pending)."""
    return {
        "tier": ticket.tier,
        "need": dict(ticket.needed),
        "policy_version": ticket.policy_version,
        "counted_for": [{"approver": who, "group": ticket.counted_for[who]} for who in ticket.approvers],
        "no_longer_counting": ticket.no_longer_counting if ticket.status is TicketStatus.PENDING else [],
        "missing": ticket.still_missing,
    }


def _notification(row: NotificationRow) -> Notification:
    return Notification(
        id=row.id, ticket_id=row.ticket_id, event=row.event, payload=row.payload,
        created_at=_utc(row.created_at), next_attempt_at=_utc(row.next_attempt_at),  # type: ignore[arg-type]
        attempts=row.attempts, sent_at=_utc(row.sent_at), failed_at=_utc(row.failed_at),
        last_error=row.last_error,
    )


class Outbox:
    """The notifications to send, one row per ticket event, and who is sending each."""

    def __init__(self, database: Database, *, enabled: bool = False) -> None:
        """`enabled`: write a notification for each ticket event (on when a webhook is configured)."""
        self.database = database
        self.enabled = enabled

    async def add(self, db: AsyncSession | AsyncConnection, event: str, ticket: Ticket, at: datetime) -> None:
        """Add the notification of `event` to the transaction that makes the change (if webhooks are on)."""
        if not self.enabled:
            return
        event_id = new_id("N")
        # Its `text` and `timestamp` are added when it is sent (notifications.py).
        body = {"id": event_id, "type": event, "created_at": at.isoformat(timespec="seconds"),
                "ticket": ticket_fields(ticket)}
        await db.execute(_ADD, {"id": event_id, "ticket_id": ticket.id, "event": event, "created_at": at,
                                "next_attempt_at": at, "attempts": 0, "payload": json.dumps(body)})

    def add_message(self, db: AsyncSession, *, ticket_id: str, event: str, body: dict[str, Any],
                    due: datetime) -> str:
        """Add a message of the app's own about a ticket (a Slack reply, docs/slack.md) to `db`'s transaction.

        Written even with the webhook's events off: it answers someone who asked. Sent when `due`; returns its id.
        """
        event_id = new_id("N")
        now = self.database.now()
        db.add(NotificationRow(id=event_id, ticket_id=ticket_id[:40], event=event, created_at=now,
                               next_attempt_at=due, attempts=0,
                               payload=json.dumps({"id": event_id, "type": event} | body)))
        return event_id

    async def make_due(self, notification_id: str) -> None:
        """Bring an unsent notification's next attempt to now (its writer is done waiting for something)."""
        async with await self.database.session() as db, db.begin():
            await db.execute(update(NotificationRow).where(
                NotificationRow.id == notification_id, NotificationRow.sent_at.is_(None),
                NotificationRow.failed_at.is_(None)).values(next_attempt_at=self.database.now()))

    async def postpone(self, notification_id: str, holder: str, until: datetime) -> None:
        """Hand a claimed row back unsent and untried, due again at `until` (what it reports is not ready)."""
        await self._release(notification_id, holder, next_attempt_at=until)

    async def claim_due(self, holder: str, limit: int = 20, events: tuple[str, ...] = ()) -> list[Notification]:
        """Claim up to `limit` due notifications under no live lease, oldest first; each by one sender only. With
        `events`, only those (a server with no webhook sends A2A pushes only).

        The WHERE is repeated on the UPDATE so that a row another sender took meanwhile is never taken twice.
        """
        now = self.database.now()
        claimable = (NotificationRow.sent_at.is_(None), NotificationRow.failed_at.is_(None),
                     NotificationRow.next_attempt_at <= now,
                     or_(NotificationRow.claimed_until.is_(None), NotificationRow.claimed_until <= now),
                     *([NotificationRow.event.in_(events)] if events else []))
        # A CTE, MATERIALIZED: PostgreSQL may run a plain subquery again for
        # each row it updates, and its LIMIT would then count per run.
        due = (select(NotificationRow.id).where(*claimable).order_by(NotificationRow.next_attempt_at)
               .limit(limit).with_for_update(skip_locked=True)
               .cte("due").prefix_with("MATERIALIZED", dialect="postgresql"))
        async with await self.database.session() as db, db.begin():
            taken = list(await db.scalars(
                update(NotificationRow)
                .where(NotificationRow.id.in_(select(due.c.id)), *claimable)
                .values(claimed_by=holder, claimed_until=now + LEASE)
                .returning(NotificationRow.id)
                .execution_options(synchronize_session=False)
            ))
            rows = await db.scalars(select(NotificationRow).where(NotificationRow.id.in_(taken))
                                    .order_by(NotificationRow.created_at, NotificationRow.id))
            return [_notification(row) for row in rows]

    async def mark_sent(self, notification_id: str, holder: str) -> None:
        await self._release(notification_id, holder, sent_at=self.database.now(), last_error=None)

    async def release_claim(self, notification_id: str, holder: str) -> None:
        """Hand a claimed row back unsent and untried: the next sender takes it, when it is due."""
        await self._release(notification_id, holder)

    async def mark_failed_attempt(self, notification: Notification, holder: str, error: str) -> Notification:
        """Record a failed POST: retry later, or give up after the last attempt."""
        attempts = notification.attempts + 1
        now = self.database.now()
        given_up = attempts >= MAX_ATTEMPTS
        await self._release(
            notification.id, holder, attempts=attempts, last_error=error[:MAX_REASON],
            failed_at=now if given_up else None,
            next_attempt_at=now if given_up else now + timedelta(seconds=BACKOFF[min(attempts, len(BACKOFF)) - 1]),
        )
        async with await self.database.session() as db:
            row = await db.get(NotificationRow, notification.id)
            assert row is not None
            return _notification(row)

    async def _release(self, notification_id: str, holder: str, **values: Any) -> None:
        async with await self.database.session() as db, db.begin():
            await db.execute(
                update(NotificationRow)
                .where(NotificationRow.id == notification_id, NotificationRow.claimed_by == holder)
                .values(claimed_by=None, claimed_until=None, **values)
            )

    async def of_ticket(self, ticket_id: str) -> list[Notification]:
        """A ticket's notifications, oldest first."""
        async with await self.database.session() as db:
            rows = await db.scalars(select(NotificationRow).where(NotificationRow.ticket_id == ticket_id)
                                    .order_by(NotificationRow.created_at, NotificationRow.id))
            return [_notification(row) for row in rows]
