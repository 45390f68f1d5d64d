"""What the ledger hands out: tickets, payouts and audit entries, and the names of their states."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from .policy import from_cents

if TYPE_CHECKING:
    from .schema import PayoutRow, TicketRow


class TicketStatus(StrEnum):
    """A ticket moves from PENDING to one of the others, once, and nowhere else."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


DECIDED = (TicketStatus.APPROVED, TicketStatus.REJECTED, TicketStatus.EXPIRED, TicketStatus.CANCELLED)


def utc_now() -> datetime:
    return datetime.now(UTC)


def _utc(value: datetime | None) -> datetime | None:
    # SQLite hands back naive datetimes; everything stored here is UTC.
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Conversation:
    """Where a conversation is, as ADK names it: app, user and session."""

    app_name: str
    user_id: str
    session_id: str


@dataclass(frozen=True)
class Ticket:
    id: str
    app_name: str
    user_id: str
    session_id: str
    call_id: str
    call_name: str
    purpose: str
    amount_cents: int
    status: TicketStatus
    created_at: datetime
    expires_at: datetime
    decided_by: str | None
    decided_at: datetime | None
    reason: str | None
    session_store: str
    delivered_at: datetime | None
    delivery_error: str | None
    settled_by: str | None
    settled_at: datetime | None

    @classmethod
    def of(cls, row: TicketRow) -> Ticket:
        return cls(
            **{name: getattr(row, name) for name in cls.__dataclass_fields__}
            | {
                "status": TicketStatus(row.status),
                "created_at": _utc(row.created_at),
                "expires_at": _utc(row.expires_at),
                "decided_at": _utc(row.decided_at),
                "delivered_at": _utc(row.delivered_at),
                "settled_at": _utc(row.settled_at),
            }
        )

    @property
    def amount(self) -> float:
        return float(from_cents(self.amount_cents))

    @property
    def amount_text(self) -> str:
        return f"${from_cents(self.amount_cents):,}"

    @property
    def conversation(self) -> Conversation:
        return Conversation(self.app_name, self.user_id, self.session_id)

    def as_response(self) -> dict[str, Any]:
        """The ticket as the approval tool's response, as the model sees it."""
        response: dict[str, Any] = {
            "status": self.status.value,
            "ticket_id": self.id,
            "purpose": self.purpose,
            "amount": self.amount,
            "requested_by": self.user_id,
            "created_at": self.created_at.isoformat(timespec="seconds"),
            "expires_at": self.expires_at.isoformat(timespec="seconds"),
        }
        if self.status is not TicketStatus.PENDING:
            response |= {
                "decided_by": self.decided_by,
                "decided_at": self.decided_at.isoformat(timespec="seconds")
                if self.decided_at
                else None,
                "reason": self.reason,
            }
        return response


@dataclass(frozen=True)
class Payout:
    id: str
    ticket_id: str | None
    app_name: str
    call_id: str
    user_id: str
    session_id: str
    purpose: str
    amount_cents: int
    paid_at: datetime

    @classmethod
    def of(cls, row: PayoutRow) -> Payout:
        return cls(
            **{name: getattr(row, name) for name in cls.__dataclass_fields__}
            | {"paid_at": _utc(row.paid_at)}
        )

    @property
    def amount_text(self) -> str:
        return f"${from_cents(self.amount_cents):,}"

    def as_response(self, *, already_paid: bool = False) -> dict[str, Any]:
        return {
            "status": "already_paid" if already_paid else "paid",
            "payout_id": self.id,
            "ticket_id": self.ticket_id,
            "purpose": self.purpose,
            "amount": float(from_cents(self.amount_cents)),
            "paid_at": self.paid_at.isoformat(timespec="seconds"),
        }


@dataclass(frozen=True)
class AuditEntry:
    at: datetime
    actor: str
    action: str
    detail: str | None
