"""The approval ledger: the only authority on whether money may be paid out.

One object per concern, named for its module (`ledger.tickets`: tickets.py), on one database handle. The database,
not a scan of session events, guarantees that a ticket is decided once and paid at most once.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from ..names import APPROVAL_TOOL
from ..refusals.rules import NeedsNoApproval, UnusableUserId
from . import inputs
from .database import Database
from .deliveries import Deliveries
from .inbox import InboxQueries
from .locks import ConversationLocks
from .outbox import Outbox
from .payouts import Payouts
from .policy import Policy, needs_approval, parse_request, purpose_key, requester_of, to_cents
from .records import Payout, Requested, ToolCall, utc_now
from .tickets import Tickets


class Ledger:
    """Tickets, payouts, deliveries, the outbox, locks and the inbox, each an object on one database."""

    def __init__(
        self, url: str, *, clock: Callable[[], datetime] = utc_now, auto_migrate: bool = True,
        engine: AsyncEngine | None = None, outbox: bool = False, approvers: frozenset[str] | None = None,
        policy: Policy | None = None,
    ) -> None:
        """`approvers`: the only names that may decide or settle (APPROVERS); None lets any but the requester's."""
        self.policy = policy or Policy()
        self.database = Database(url, clock=clock, auto_migrate=auto_migrate, engine=engine)
        self.outbox = Outbox(self.database, enabled=outbox)
        self.tickets = Tickets(self.database, self.outbox, approvers=approvers)
        self.payouts = Payouts(self.database)
        self.deliveries = Deliveries(self.database, self.tickets)
        self.inbox = InboxQueries(self.database, self.tickets)
        self.locks = ConversationLocks(self.database, record_deliveries=self.deliveries.record_delivered)

    async def request_approval(self, call: ToolCall, *, purpose: object, amount: object) -> Requested:
        """Open a pending ticket for one expense, or raise the refusal that stops it (refusals/).

        A requester must be a canonical name, so that nobody can pass for an approver.
        """
        clean_purpose, clean_amount = parse_request(purpose, amount, self.policy)
        user_id = call.conversation.user_id
        if not inputs.is_canonical_name(user_id):
            raise UnusableUserId(user_id)
        daily = None
        if not needs_approval(clean_amount, self.policy):
            daily = await self.payouts.auto_approval_refusal(
                amount_cents=to_cents(clean_amount), **self._daily_rules(user_id, clean_purpose))
            if daily is None:
                raise NeedsNoApproval(clean_amount, self.policy.approval_threshold)
        conversation = call.conversation
        ticket = await self.tickets.open(
            app_name=conversation.app_name, user_id=user_id, session_id=conversation.session_id,
            call_id=call.call_id, call_name=APPROVAL_TOOL, purpose=clean_purpose,
            amount_cents=to_cents(clean_amount), ttl=self.policy.approval_ttl, session_store=call.session_store,
            note=daily.why if daily else None, message_id=call.message_id,
            dual_above_cents=to_cents(self.policy.dual_approval_above),
        )
        return Requested(ticket, daily_rules=daily.message if daily else None,
                         combined_with=tuple(await self.tickets.combined_with(ticket)),
                         dual_approval_above=self.policy.dual_approval_above)

    async def reimburse(self, call: ToolCall, *, purpose: object, amount: object) -> tuple[Payout, bool]:
        """Pay an expense, above the threshold only through an approved ticket; returns (payout, already_paid)."""
        clean_purpose, clean_amount = parse_request(purpose, amount, self.policy)
        cents, conversation = to_cents(clean_amount), call.conversation
        if needs_approval(clean_amount, self.policy):
            return await self.payouts.pay_approved(conversation=conversation, call_id=call.call_id,
                                                   purpose=clean_purpose, amount_cents=cents, prefer=call.resumed_by)
        return await self.payouts.pay_small(conversation=conversation, call_id=call.call_id, purpose=clean_purpose,
                                            amount_cents=cents,
                                            **self._daily_rules(conversation.user_id, clean_purpose))

    def _daily_rules(self, user_id: str, purpose: str) -> dict[str, Any]:
        """Whom and what the daily rules count a payout without approval against."""
        return {"requester": requester_of(user_id), "purpose_key": purpose_key(purpose),
                "daily_limit_cents": to_cents(self.policy.daily_auto_approval_limit)}

    @property
    def engine(self) -> AsyncEngine:
        return self.database.engine

    def now(self) -> datetime:
        return self.database.now()

    async def prepare(self) -> tuple[str | None, str]:
        """Bring the tables to this code's schema (migrate.py); returns (from, to)."""
        return await self.database.prepare()

    async def close(self) -> None:
        await self.database.close()
