"""The ledger's tables: tickets, payouts, the audit trail, the daily counters and conversation locks.

The invariants live here, as constraints the database enforces: a payout is
UNIQUE per ticket and per tool call, a payout made without approval is UNIQUE
per requester, day and purpose. The indexes serve the inbox's queries. A change
here needs a migration (ledger/migrations/); a test checks that they agree.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    bindparam,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from ..records import Conversation


class Base(DeclarativeBase):
    # Named constraints, so a migration can name what it changes (Alembic's advice).
    metadata = MetaData(naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    })


# Decided (every move out of pending sets decided_at) but not yet delivered. Without constants, so that SQLite,
# which matches a partial index's WHERE term by term, uses the index for queries stating the same terms.
_UNDELIVERED_SQL = text("delivered_at IS NULL AND settled_at IS NULL AND decided_at IS NOT NULL")
# A decision asked for from Slack and not made yet (SlackRequestRow).
_UNDONE_SQL = text("decision IS NOT NULL AND done_at IS NULL")


class TicketRow(Base):
    __tablename__ = "approval_tickets"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    app_name: Mapped[str] = mapped_column(String(128))
    user_id: Mapped[str] = mapped_column(String(128))
    session_id: Mapped[str] = mapped_column(String(128), index=True)
    call_id: Mapped[str] = mapped_column(String(128))
    call_name: Mapped[str] = mapped_column(String(128))
    purpose: Mapped[str] = mapped_column(String(300))
    amount_cents: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    decided_by: Mapped[str | None] = mapped_column(String(128))
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    reason: Mapped[str | None] = mapped_column(String(500))
    # Set when an approver approved less than was asked: what may be paid.
    approved_cents: Mapped[int | None] = mapped_column(Integer)
    # The approval policy's tier when the ticket opened (policy/rules.py): its need ("finance=1,cfo=1"), how many
    # approvals that is, and the policy's version. `counted` says who has approved so far, each for one group
    # ("bob=finance"): every approval is one UPDATE conditional on the `counted` it was judged against
    # (policy/approving.py).
    approvals_needed: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    need: Mapped[str | None] = mapped_column(String(300))
    tier: Mapped[int | None] = mapped_column(Integer)
    policy_version: Mapped[str | None] = mapped_column(String(16))
    counted: Mapped[str | None] = mapped_column(String(1000))
    first_approved_by: Mapped[str | None] = mapped_column(String(128))
    first_approved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The request groups this ticket's amount was added to (RequestTotalRow.request_group, one
    # per line), so a rejection takes it back out; and, when the group's total rather than the
    # amount alone crossed DUAL_APPROVAL_ABOVE, that total, to tell people why two approvers.
    request_groups: Mapped[str | None] = mapped_column(String(1000))
    combined_cents: Mapped[int | None] = mapped_column(BigInteger)
    # Reminded once, before it expires; escalated to these approvers then (comma-separated).
    reminded_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    escalated_to: Mapped[str | None] = mapped_column(String(300))
    # Where the conversation lives (delivery/conversations.py), so a decision made in any process reaches it.
    session_store: Mapped[str] = mapped_column(String(1000), default="app")
    # Set by the run that delivered the decision, under the conversation's lock (locks.py); the last failed
    # attempt, if any, says why it has not arrived yet.
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    delivery_error: Mapped[str | None] = mapped_column(String(500))
    # A decision whose conversation is gone is settled by an approver: paid without the agent, or closed.
    settled_by: Mapped[str | None] = mapped_column(String(128))
    settled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The head of the ticket's audit chain (audit.py): its last row's seq and hash, kept by a trigger on each audit
    # row added, so that deleting the last row shows too; the audit row's INSERT locks this row (no fork).
    audit_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    audit_head: Mapped[str] = mapped_column(String(64), default="", server_default="")

    # Call ids are unique within a conversation only: Gemini may supply its own.
    # The indexes serve the inbox: each list is read in index order (`id` breaks
    # ties, so pages never overlap) and each total is counted from the index alone.
    __table_args__ = (
        Index("ix_approval_tickets_status_created_id", "status", "created_at", "id"),
        Index("ix_approval_tickets_decided", "decided_at", "id"),
        # Each inbox load and server sweep first expires the overdue tickets: a range, not a scan.
        Index("ix_approval_tickets_status_expires", "status", "expires_at"),
        # Only undelivered decisions, so it stays small. delivered_at and settled_at (always NULL here) are columns
        # too: SQLite counts from an index only if it holds every column the query names.
        Index("ix_approval_tickets_undelivered", "decided_at", "id", "delivered_at", "settled_at",
              sqlite_where=_UNDELIVERED_SQL, postgresql_where=_UNDELIVERED_SQL),
        UniqueConstraint("app_name", "user_id", "session_id", "call_id"),
        # A requester's day beside each ticket approvers see (request_totals.requester_days).
        Index("ix_approval_tickets_user_created", "user_id", "created_at"),
    )


class PayoutRow(Base):
    __tablename__ = "approval_payouts"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    # UNIQUE: at most one payout per ticket, enforced by the database.
    ticket_id: Mapped[str | None] = mapped_column(ForeignKey("approval_tickets.id"), unique=True)
    app_name: Mapped[str] = mapped_column(String(128))
    call_id: Mapped[str] = mapped_column(String(128))
    user_id: Mapped[str] = mapped_column(String(128))
    session_id: Mapped[str] = mapped_column(String(128), index=True)
    purpose: Mapped[str] = mapped_column(String(300))
    amount_cents: Mapped[int] = mapped_column(Integer)
    paid_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)  # what was paid today

    # One payout per tool call in a conversation: a re-run of the same call reports it.
    __table_args__ = (UniqueConstraint("app_name", "user_id", "session_id", "call_id"),)


class DailyAutoApprovalRow(Base):
    """What one requester was paid without approval on one UTC day: the daily cap's counter."""

    __tablename__ = "daily_auto_approvals"
    requester: Mapped[str] = mapped_column(String(128), primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    total_cents: Mapped[int] = mapped_column(Integer)


class RequestTotalRow(Base):
    """What one requester asked approvers for, or was paid, on one UTC day, per group (policy/request_totals.py)."""

    __tablename__ = "request_totals"
    requester: Mapped[str] = mapped_column(String(128), primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    request_group: Mapped[str] = mapped_column(String(400), primary_key=True)
    total_cents: Mapped[int] = mapped_column(BigInteger)


class AutoApprovedPayoutRow(Base):
    """A payout made without approval, with what the same-purpose rule compares."""

    __tablename__ = "auto_approved_payouts"
    payout_id: Mapped[str] = mapped_column(ForeignKey("approval_payouts.id"), primary_key=True)
    requester: Mapped[str] = mapped_column(String(128))
    day: Mapped[date] = mapped_column(Date)
    purpose_key: Mapped[str] = mapped_column(String(300))

    # UNIQUE: one payout without approval per requester, UTC day and purpose.
    __table_args__ = (UniqueConstraint("requester", "day", "purpose_key"),)


class AuditRow(Base):
    """One entry of a ticket's trail, chained: `hash` covers its content and the previous row's hash (audit.py).

    `ticket_id` is the chain's key: a ticket's id, or for a payout made without approval its payout's id. `facts`:
    the columns of the ticket or payout this entry records, as written (chain.STATED), for `audit verify` to compare.
    """

    __tablename__ = "approval_audit"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    ticket_id: Mapped[str] = mapped_column(String(40))
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    actor: Mapped[str] = mapped_column(String(128))
    action: Mapped[str] = mapped_column(String(32))
    detail: Mapped[str | None] = mapped_column(String(500))
    facts: Mapped[str | None] = mapped_column(Text)
    seq: Mapped[int] = mapped_column(Integer)
    hash: Mapped[str] = mapped_column(String(64))

    # One row per place in a ticket's chain: two writers can never both follow the same row.
    __table_args__ = (UniqueConstraint("ticket_id", "seq"),)


class DecisionRow(Base):
    """Each approver's decision on a ticket with its evidence: channel, principal, what they saw (evidence.py)."""

    __tablename__ = "approval_decisions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    ticket_id: Mapped[str] = mapped_column(String(40), index=True)
    approver: Mapped[str] = mapped_column(String(200))
    approve: Mapped[bool] = mapped_column(Boolean)
    counted_as: Mapped[str | None] = mapped_column(String(128))
    cents: Mapped[int | None] = mapped_column(BigInteger)
    channel: Mapped[str] = mapped_column(String(16))
    principal: Mapped[str] = mapped_column(String(500))
    shown: Mapped[str] = mapped_column(String(64))
    reason: Mapped[str | None] = mapped_column(String(500))
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    # No approver counts twice on one ticket, whatever the code above it does.
    __table_args__ = (
        Index("uq_approval_decisions_approval", "ticket_id", "approver", unique=True,
              sqlite_where=text("approve"), postgresql_where=text("approve")),
    )


class NotificationRow(Base):
    """The outbox (outbox.py): one webhook per ticket event, claimed by one sender at a time, retried until sent."""

    __tablename__ = "notifications"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    ticket_id: Mapped[str] = mapped_column(String(40), index=True)
    event: Mapped[str] = mapped_column(String(40))
    payload: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    failed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(String(500))
    claimed_by: Mapped[str | None] = mapped_column(String(200))
    claimed_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    # What is still to send, in the order it is due: the sender reads this range only.
    __table_args__ = (
        Index("ix_notifications_due", "next_attempt_at",
              sqlite_where=text("sent_at IS NULL AND failed_at IS NULL"),
              postgresql_where=text("sent_at IS NULL AND failed_at IS NULL")),
    )


class PendingCountRow(Base):
    """How many tickets are pending, kept by migration 0007's triggers: the sum of the rows (benchmarks/README.md)."""

    __tablename__ = "pending_counts"
    shard: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    pending: Mapped[int] = mapped_column(BigInteger)


class ConversationLockRow(Base):
    __tablename__ = "conversation_locks"
    app_name: Mapped[str] = mapped_column(String(128), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    holder: Mapped[str] = mapped_column(String(200))
    purpose: Mapped[str] = mapped_column(String(200))
    acquired_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


def undelivered() -> Any:
    """The partial index's condition (`_UNDELIVERED_SQL`), as the queries state it."""
    return TicketRow.delivered_at.is_(None) & TicketRow.settled_at.is_(None) & TicketRow.decided_at.is_not(None)


# Every column of a ticket, for Core statements that read or return a whole ticket (records.Ticket.of).
TICKET_COLUMNS = tuple(TicketRow.__table__.columns)

# `in_conversation` with its values bound at execution: {"app_name": ..., "user_id": ..., "session_id": ...}.
IN_BOUND_CONVERSATION = (
    (TicketRow.app_name == bindparam("c_app_name"))
    & (TicketRow.user_id == bindparam("c_user_id"))
    & (TicketRow.session_id == bindparam("c_session_id"))
)


def conversation_params(conversation: Conversation) -> dict[str, str]:
    """The values of IN_BOUND_CONVERSATION."""
    return {"c_app_name": conversation.app_name, "c_user_id": conversation.user_id,
            "c_session_id": conversation.session_id}


def in_conversation(conversation: Conversation, table: Any = TicketRow) -> Any:
    """Rows (tickets, unless `table` says otherwise) of this very conversation: app, user and session all match."""
    return (
        (table.app_name == conversation.app_name)
        & (table.user_id == conversation.user_id)
        & (table.session_id == conversation.session_id)
    )


class SlackRequestRow(Base):
    """A request from Slack that was taken, and the decision it asks for, until it is made (docs/slack.md).

    `id` is the signature's hash: its PRIMARY KEY makes the replay check one INSERT for every replica.
    """

    __tablename__ = "slack_requests"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    ticket_id: Mapped[str | None] = mapped_column(String(40))
    decision: Mapped[str | None] = mapped_column(Text)
    done_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_slack_requests_undone", "received_at", sqlite_where=_UNDONE_SQL, postgresql_where=_UNDONE_SQL),
    )


class A2aTaskRow(Base):
    """A task of another agent's (a2a/): the message that opened it and the ticket whose fate it follows.

    UNIQUE per client and message id: a retried send finds its task, and opens no second ticket.
    """

    __tablename__ = "a2a_tasks"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    client: Mapped[str] = mapped_column(String(128))
    message_id: Mapped[str] = mapped_column(String(128))
    context_id: Mapped[str] = mapped_column(String(128))
    session_id: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))  # the agent's turn, not the task
    ticket_id: Mapped[str | None] = mapped_column(String(40), index=True)
    payout_ids: Mapped[str | None] = mapped_column(Text)
    reply: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (UniqueConstraint("client", "message_id"), Index("ix_a2a_tasks_client", "client", "created_at"))


class A2aPushRow(Base):
    """Where a client asked for a task's outcome to be pushed; `queued_at`: put in the outbox, once."""

    __tablename__ = "a2a_push_configs"
    task_id: Mapped[str] = mapped_column(String(40), ForeignKey("a2a_tasks.id"), primary_key=True)
    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    url: Mapped[str] = mapped_column(Text)
    token: Mapped[str | None] = mapped_column(Text)
    queued_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
