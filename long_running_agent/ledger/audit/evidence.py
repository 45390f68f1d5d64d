"""Evidence for every decision: by what channel, as whom that channel authenticated, having seen what.

Each approval or rejection adds a row (storage/schema.py's DecisionRow) in the transaction that records it.
`document` gathers a ticket's request, policy tier, decisions with their evidence, payout, and whether its audit
chain holds: one JSON document that explains a payout (GET /api/approvals/{id}/evidence, `expenses evidence T-...`;
docs/policy.md).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ..inputs import MAX_REASON, from_cents
from ..records import Ticket
from ..storage.schema import AuditRow, DecisionRow
from . import chain

_ADD = insert(DecisionRow)


@dataclass(frozen=True)
class Via:
    """How a decision arrived: its channel (api, inbox, cli, slack; chat under DEV_CHAT_APPROVAL; ledger for a
    direct call) and its principal as that channel authenticated it; `shown`, the digest of the ticket the approver
    was shown, when the surface sends it (a decision on another ticket is then refused)."""

    channel: str = "ledger"
    principal: dict[str, str] = field(default_factory=dict)
    shown: str | None = None


def digest(ticket: Ticket) -> str:
    """What an approver is shown of a request, hashed: it never changes while the ticket lives."""
    shown = {"ticket_id": ticket.id, "requested_by": ticket.user_id, "purpose": ticket.purpose,
             "amount_cents": ticket.amount_cents, "created_at": ticket.created_at.isoformat(),
             "combined_cents": ticket.combined_cents, "tier": ticket.tier, "need": ticket.need,
             "policy_version": ticket.policy_version}
    return hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()


def entry(approver: str, approve: bool, counted_as: str | None, cents: int | None, channel: str, principal: str,
          shown: str) -> str:
    """A decision's evidence as its audit entry holds it, so the hash chain covers it (canonical JSON)."""
    return json.dumps({"approver": approver, "approve": approve, "counted_as": counted_as, "cents": cents,
                       "channel": channel, "principal": principal, "shown": shown}, sort_keys=True)


async def add(db: AsyncConnection, ticket_id: str, *, approver: str, approve: bool, counted_as: str | None,
              cents: int | None, via: Via, shown: str, reason: str | None, at: datetime) -> None:
    """Keep a decision's evidence, and the same in the ticket's audit chain (action "evidence")."""
    principal = json.dumps(via.principal, sort_keys=True)[:250]
    await db.execute(_ADD, {"ticket_id": ticket_id, "approver": approver, "approve": approve, "counted_as": counted_as,
                            "cents": cents, "channel": via.channel, "principal": principal, "shown": shown,
                            "reason": reason[:MAX_REASON] if reason else None, "at": at})
    await chain.write(db, ticket_id, at=at, actor=approver, action="evidence",
                      detail=entry(approver, approve, counted_as, cents, via.channel, principal, shown))


async def decisions(db: Any, ticket: Ticket) -> list[dict[str, Any]]:
    """Each decision on the ticket with its evidence, in the order they were made, and whether the audit chain
    holds the same evidence (`in_audit_chain`: a changed evidence row is caught; a changed chain, by verify).

    `counted_for` is the group an approval counts for on the ticket as it stands (decided, or judged with who is in
    which group now), None if it counts for none: an approval may have moved to another group since it was made.
    """
    rows = list(await db.execute(select(*DecisionRow.__table__.columns).where(DecisionRow.ticket_id == ticket.id)
                                 .order_by(DecisionRow.id)))
    chained = set(await db.scalars(select(AuditRow.detail).where(AuditRow.ticket_id == ticket.id,
                                                                 AuditRow.action == "evidence")))
    counts = ticket.counted_for
    return [{
        "approver": row.approver, "decision": "approve" if row.approve else "reject",
        # A chat approval's approver is "alice (chat, DEV_CHAT_APPROVAL)": a name holds no space.
        "counted_for": counts.get(row.approver.partition(" ")[0]) if row.approve else None,
        "amount": float(from_cents(row.cents)) if row.cents is not None else None, "channel": row.channel,
        "principal": json.loads(row.principal), "shown_sha256": row.shown, "reason": row.reason,
        "at": row.at.replace(tzinfo=row.at.tzinfo or UTC).isoformat(timespec="seconds"),
        # As chain.write keeps it: cut at MAX_REASON.
        "in_audit_chain": entry(row.approver, bool(row.approve), row.counted_as, row.cents, row.channel,
                                row.principal, row.shown)[:MAX_REASON] in chained,
    } for row in rows]


def document(ticket: Ticket, *, message_id: str | None, rules_version: str, tier_above: str | None,
             decisions: list[dict[str, Any]], payouts: list[dict[str, Any]], chain: dict[str, Any]) -> dict[str, Any]:
    """The one JSON document that explains a ticket and its payout."""
    return {
        "ticket_id": ticket.id,
        "status": ticket.status.value,
        "request": {
            "requested_by": ticket.user_id, "purpose": ticket.purpose, "amount": ticket.amount,
            "requested_at": ticket.created_at.isoformat(timespec="seconds"),
            "conversation": {"app_name": ticket.app_name, "user_id": ticket.user_id, "session_id": ticket.session_id,
                             "call_id": ticket.call_id, "invocation_id": message_id},
            "shown_sha256": digest(ticket),
        },
        "policy": {"tier": ticket.tier, "above": tier_above, "need": dict(ticket.needed),
                   "version": ticket.policy_version, "current_version": rules_version,
                   "combined_amount": float(from_cents(ticket.combined_cents)) if ticket.combined_cents else None},
        "decisions": decisions,
        "approved_amount": float(from_cents(ticket.payable_cents)) if ticket.approvers else None,
        "payouts": payouts,
        "audit_chain": chain,
    }
