"""Tickets, payouts and audit entries as the approvals API shows them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from google.adk.events import Event

from ..error_text import without_sql
from ..ledger import AuditEntry, Notification, Payout, Ticket
from ..ledger.audit import evidence
from ..ledger.inputs import from_cents
from ..ledger.outbox import policy_fields
from ..ledger.policy.request_totals import RequesterDay


def _iso(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value else None


def ticket_json(ticket: Ticket, now: datetime, failed_at: dict[str, datetime] | None = None,
                day: RequesterDay | None = None) -> dict[str, Any]:
    """`failed_at`: when the latest failed delivery of each ticket was recorded (ledger.deliveries.failures);
    `day`: the requester's day, shown beside a ticket an approver decides (docs/security.md: split requests)."""
    return {
        "id": ticket.id,
        "status": ticket.status.value,
        "requester": ticket.user_id,
        "amount": ticket.amount,
        "amount_text": ticket.amount_text,
        "approved_amount": float(from_cents(ticket.payable_cents)) if ticket.changed else None,
        "approvals_needed": ticket.approvals_needed,
        "approvals": ticket.approvals_shown,
        "combined_amount": float(from_cents(ticket.combined_cents)) if ticket.combined_cents else None,
        "requester_today": day.as_json(ticket) if day else None,
        "approved_by": ticket.approvers,
        **policy_fields(ticket),
        # What an approver is shown, hashed: sent back as a decision's `shown`, a decision on another ticket is refused.
        "shown_sha256": evidence.digest(ticket),
        "reminded_at": _iso(ticket.reminded_at),
        "escalated_to": ticket.escalated_to.split(",") if ticket.escalated_to else [],
        "purpose": ticket.purpose,
        "created_at": _iso(ticket.created_at),
        "age_seconds": int((now - ticket.created_at).total_seconds()),
        "expires_at": _iso(ticket.expires_at),
        "decided_by": ticket.decided_by,
        "decided_at": _iso(ticket.decided_at),
        "reason": ticket.reason,
        "delivered_at": _iso(ticket.delivered_at),
        "delivery_error": without_sql(ticket.delivery_error),
        "delivery_failed_at": _iso((failed_at or {}).get(ticket.id)),
        "settled_by": ticket.settled_by,
        "settled_at": _iso(ticket.settled_at),
        "session_id": ticket.session_id,
    }


def payout_json(payout: Payout) -> dict[str, Any]:
    return {"status": "paid"} | payout.as_record() | {"requester": payout.user_id}


def notification_json(notification: Notification) -> dict[str, Any]:
    return {
        "id": notification.id,
        "event": notification.event,
        "state": notification.state,
        "created_at": _iso(notification.created_at),
        "attempts": notification.attempts,
        "sent_at": _iso(notification.sent_at),
        "failed_at": _iso(notification.failed_at),
        "next_attempt_at": None if notification.sent_at or notification.failed_at else _iso(
            notification.next_attempt_at),
        "last_error": without_sql(notification.last_error),
    }


def audit_json(entry: AuditEntry) -> dict[str, Any]:
    return {"at": _iso(entry.at), "actor": entry.actor, "action": entry.action, "detail": without_sql(entry.detail)}


def agent_reply(events: list[Event]) -> str | None:
    """The last thing the agent said while the decision was delivered, as the requester will see it."""
    texts = [
        part.text
        for event in events
        if event.author != "user" and event.content and event.content.parts
        for part in event.content.parts
        if part.text and not part.thought
    ]
    return texts[-1] if texts else None
