"""What the ledger hands out: tickets, payouts and audit entries, and the names of their states."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from ..names import DECIDED, PayoutStatus, TicketStatus
from .inputs import from_cents
from .need import EVERYONE, Need, need_words, parse_counted, parse_need, progress_text

__all__ = ["DECIDED", "AuditEntry", "Conversation", "Notification", "Payout", "Requested", "Ticket", "TicketStatus",
           "ToolCall", "utc_now"]


def utc_now() -> datetime:
    return datetime.now(UTC)


def _utc(value: datetime | None) -> datetime | None:
    # SQLite hands back naive datetimes; everything stored here is UTC.
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def _fields(cls: Any, row: Any, *, besides: tuple[str, ...] = ()) -> dict[str, Any]:
    """The dataclass `cls`'s fields (but `besides`) from the row's attributes of the same names, times in UTC."""
    values = {name: getattr(row, name) for name in cls.__dataclass_fields__ if name not in besides}
    return {name: _utc(value) if isinstance(value, datetime) else value for name, value in values.items()}


@dataclass(frozen=True)
class Conversation:
    """Where a conversation is, as ADK names it: app, user and session."""

    app_name: str
    user_id: str
    session_id: str


@dataclass(frozen=True)
class ToolCall:
    """One call of a tool, as ADK names it."""

    conversation: Conversation
    call_id: str
    # ADK's invocation id: the requests of one message add up under the two-person rule.
    message_id: str | None = None
    # Which session store holds the conversation (delivery/conversations.py), so a decision reaches it.
    session_store: str = "app"
    # The decisions this call's run was resumed with, read under the conversation's lock: `reimburse` pays these first.
    resumed_by: tuple[Ticket, ...] = ()


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
    approved_cents: int | None
    approvals_needed: int
    first_approved_by: str | None
    first_approved_at: datetime | None
    combined_cents: int | None
    reminded_at: datetime | None
    escalated_to: str | None
    session_store: str
    delivered_at: datetime | None
    delivery_error: str | None
    settled_by: str | None
    settled_at: datetime | None
    # Its policy tier (need.py): the need ("finance=1,cfo=1"), its number and version, and who approved so far,
    # each with the group they counted for when the last approval was judged ("bob=finance"; "bob=" no longer counts).
    need: str | None = None
    tier: int | None = None
    policy_version: str | None = None
    counted: str | None = None
    # Not a column: `counted` judged again with who is in which group now (Rules.recount), while the ticket is pending.
    standing: str | None = None

    @classmethod
    def of(cls, row: Any) -> Ticket:
        """From a TicketRow, or a Core row of its columns (storage/schema.py's TICKET_COLUMNS)."""
        return cls(**_fields(cls, row, besides=("standing",)) | {"status": TicketStatus(row.status)})

    @property
    def amount(self) -> float:
        return float(from_cents(self.amount_cents))

    @property
    def amount_text(self) -> str:
        return f"${from_cents(self.amount_cents):,}"

    @property
    def payable_cents(self) -> int:
        """What an approved ticket pays: the amount approved, which may be less than was asked."""
        return self.amount_cents if self.approved_cents is None else self.approved_cents

    @property
    def payable_text(self) -> str:
        return f"${from_cents(self.payable_cents):,}"

    @property
    def changed(self) -> bool:
        """Approved for less than was asked."""
        return self.approved_cents is not None and self.approved_cents != self.amount_cents

    @property
    def conversation(self) -> Conversation:
        return Conversation(self.app_name, self.user_id, self.session_id)

    @property
    def needs_two_approvers(self) -> bool:
        """More than one approval decides it (its policy tier's need; the two-person rule by default)."""
        return self.approvals_needed > 1

    @property
    def needed(self) -> Need:
        """Its tier's need, by group (need.py): tickets opened before the policy need approvals from anyone."""
        return parse_need(self.need) if self.need else ((EVERYONE, self.approvals_needed),)

    @property
    def approvals(self) -> dict[str, str]:
        """Who approved so far, in order, each with the group they count for ("" for one that no longer counts)."""
        return parse_counted(self.counted if self.standing is None else self.standing)

    @property
    def counted_for(self) -> dict[str, str]:
        """Whose approvals count, each with the group they count for."""
        return {who: group for who, group in self.approvals.items() if group}

    @property
    def no_longer_counting(self) -> list[str]:
        """Approvers whose approval counts no longer: they left the groups it could count for."""
        return [who for who, group in self.approvals.items() if not group]

    @property
    def approvals_so_far(self) -> str:
        """"1 of 2": the approvals given, of those needed."""
        return f"{len(self.approvers)} of {self.approvals_needed}"

    @property
    def still_missing(self) -> str | None:
        """"1 of 2: needs 1 more from cfo" while pending; None once decided."""
        if self.status is not TicketStatus.PENDING:
            return None
        return progress_text(self.needed, self.counted_for, self.no_longer_counting)

    @property
    def approvals_shown(self) -> str | None:
        """`approvals_so_far` where the JSON shows it (the API, the webhook): only under the two-person rule."""
        return self.approvals_so_far if self.needs_two_approvers else None

    @property
    def combined_text(self) -> str | None:
        """The total that made this ticket need two approvers, when its own amount did not."""
        return f"${from_cents(self.combined_cents):,}" if self.combined_cents is not None else None

    @property
    def approvers(self) -> list[str]:
        """Who approved it, in order (as many as its tier needs)."""
        return list(self.counted_for) if self.status in (TicketStatus.PENDING, TicketStatus.APPROVED) else []

    def as_response(self) -> dict[str, Any]:
        """The approval tool's response: only what the model lacks, as each field is paid for on every later turn."""
        response: dict[str, Any] = {"status": self.status.value, "ticket_id": self.id}
        if self.status is TicketStatus.PENDING and self.first_approved_by:
            response["approvals"] = self.approvals_so_far  # progress: "1 of 2", still waiting
        if self.status is not TicketStatus.PENDING and self.decided_by:
            response["by"] = " and ".join(self.approvers) if self.status is TicketStatus.APPROVED else self.decided_by
        if self.changed:
            response |= {"amount": float(from_cents(self.payable_cents)), "asked": self.amount}
        if self.reason and self.status is not TicketStatus.EXPIRED:
            response["reason"] = self.reason
        return response

    def as_record(self) -> dict[str, Any]:
        """Every field a person may want to see (`expenses show`)."""
        return {
            "ticket_id": self.id,
            "status": self.status.value,
            "requested_by": self.user_id,
            "purpose": self.purpose,
            "amount": self.amount,
            **({"approved_amount": float(from_cents(self.payable_cents))} if self.changed else {}),
            **({"approvals": self.approvals_so_far, "approved_by": self.approvers} if self.needs_two_approvers else {}),
            # Two approvers because this request and the requester's others that day (or message) add up.
            **({"combined_amount": float(from_cents(self.combined_cents))} if self.combined_cents else {}),
            **({"escalated_to": self.escalated_to} if self.escalated_to else {}),
            "created_at": self.created_at.isoformat(timespec="seconds"),
            "expires_at": self.expires_at.isoformat(timespec="seconds"),
            **({
                "decided_by": self.decided_by,
                "decided_at": self.decided_at.isoformat(timespec="seconds") if self.decided_at else None,
                "reason": self.reason,
            } if self.status is not TicketStatus.PENDING else {}),
        }


@dataclass(frozen=True)
class Requested:
    """A ticket `ask_for_approval` opened, and why it needs an approver (or two) when its amount alone would not."""

    ticket: Ticket
    # Why a small amount needs an approver (the daily rules), in words for the requester.
    daily_rules: str | None = None
    # The requester's other open or approved tickets that its total, and so its policy tier, added this one to.
    combined_with: tuple[Ticket, ...] = ()
    tier_above: Decimal = Decimal("5000")  # the tier's `above` (DUAL_APPROVAL_ABOVE by default), in dollars

    def as_response(self) -> dict[str, Any]:
        """The ticket as the approval tool's response, with `why` when the model has to tell why."""
        why = self.daily_rules
        if self.ticket.combined_text is not None:
            listed = ", ".join(f"{t.id} ({t.amount_text} for {t.purpose})" for t in self.combined_with)
            paid = (self.ticket.combined_cents or 0) - self.ticket.amount_cents - sum(
                t.amount_cents for t in self.combined_with)
            others = [f"your other requests today ({listed})"] if listed else []
            others += [f"${from_cents(paid):,} paid to you without approval today"] if paid > 0 else []
            others = others or ["your other requests in the same message"]
            above = (f"the ${self.tier_above:,} one approver may approve, whatever each is for, so two approvers"
                     if self.ticket.needed == ((EVERYONE, 2),) else
                     f"the policy's ${self.tier_above:,} tier, whatever each is for, so "
                     + need_words(self.ticket.needed))
            why = (f"Together with {' and '.join(others)}, this comes to {self.ticket.combined_text}, above {above} "
                   "must approve it.")
        return self.ticket.as_response() | ({"why": why} if why else {})


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
    def of(cls, row: Any) -> Payout:
        return cls(**_fields(cls, row))

    @property
    def amount_text(self) -> str:
        return f"${from_cents(self.amount_cents):,}"

    @property
    def amount(self) -> float:
        return float(from_cents(self.amount_cents))

    def as_response(self, *, already_paid: bool = False) -> dict[str, Any]:
        """The payout as `reimburse`'s response: what was paid (the model has the purpose in its call)."""
        status = PayoutStatus.ALREADY_PAID if already_paid else PayoutStatus.PAID
        response = {"status": status.value, "payout_id": self.id, "amount": self.amount}
        return response | ({"ticket_id": self.ticket_id} if self.ticket_id else {})

    def as_record(self) -> dict[str, Any]:
        return {
            "payout_id": self.id,
            "ticket_id": self.ticket_id,
            "purpose": self.purpose,
            "amount": self.amount,
            "paid_at": self.paid_at.isoformat(timespec="seconds"),
        }


@dataclass(frozen=True)
class Notification:
    """One webhook in the outbox: what it reports, and how its sending went."""

    id: str
    ticket_id: str
    event: str
    payload: str
    created_at: datetime
    next_attempt_at: datetime
    attempts: int
    sent_at: datetime | None
    failed_at: datetime | None
    last_error: str | None

    @property
    def state(self) -> str:
        if self.sent_at:
            return "sent"
        if self.failed_at:
            return "failed"
        return "retrying" if self.attempts else "waiting"


@dataclass(frozen=True)
class AuditEntry:
    at: datetime
    actor: str
    action: str
    detail: str | None
