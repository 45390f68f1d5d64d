"""The approval ledger: the only authority on whether money may be paid out.

One object per concern, named for its module (`ledger.tickets`: tickets.py), on one database handle (storage/); the
rules they apply are the policy's (policy/), and what they did is in the audit trail (audit/). The database, not a
scan of session events, guarantees that a ticket is decided once and paid at most once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from ..names import APPROVAL_TOOL
from ..observability.spans import Watch
from ..refusals.rules import NeedsNoApproval, UnusableUserId
from . import inputs
from .audit import check, evidence
from .deliveries import Deliveries
from .figures import Figures
from .inbox import InboxQueries
from .inputs import requester_of, to_cents
from .need import EVERYONE
from .outbox import Outbox
from .payouts import Payouts
from .policy.rules import Policy, purpose_key
from .records import Payout, Requested, ToolCall, utc_now
from .storage.database import Database
from .storage.locks import ConversationLocks
from .storage.schema import TicketRow
from .tickets import Tickets


class Ledger:
    """Tickets, payouts, deliveries, the outbox, locks and the inbox, each an object on one database."""

    def __init__(
        self, url: str, *, clock: Callable[[], datetime] = utc_now, auto_migrate: bool = True,
        engine: AsyncEngine | None = None, outbox: bool = False, approvers: frozenset[str] | None = None,
        policy: Policy | None = None, watch: Watch | None = None,
    ) -> None:
        """`approvers` (tests): the names that may decide, all in one group; the policy's own members otherwise."""
        self.policy = policy or Policy()
        if approvers is not None:
            members = {name: frozenset({EVERYONE}) for name in approvers}
            self.policy = replace(self.policy, rules=replace(self.policy.rules, members=members))
        self.database = Database(url, clock=clock, auto_migrate=auto_migrate, engine=engine, watch=watch)
        self.watch = self.database.watch  # each operation a step: a span, and an event for metrics (observability/)
        self.outbox = Outbox(self.database, enabled=outbox)
        self.tickets = Tickets(self.database, self.outbox, rules=self.policy.rules)
        self.payouts = Payouts(self.database)
        self.deliveries = Deliveries(self.database, self.tickets)
        self.inbox = InboxQueries(self.database, self.tickets)
        self.figures = Figures(self.database)
        self.locks = ConversationLocks(self.database, record_deliveries=self.deliveries.record_delivered)

    async def request_approval(self, call: ToolCall, *, purpose: object, amount: object) -> Requested:
        """Open a pending ticket for one expense, or raise the refusal that stops it (refusals/)."""
        with self.watch.step("ledger.request", session=call.conversation.session_id) as step:
            requested = await self._request(call, purpose=purpose, amount=amount)
            step.about(ticket=requested.ticket.id)
            step.note(amount=requested.ticket.amount, purpose=requested.ticket.purpose)
            return requested

    async def _request(self, call: ToolCall, *, purpose: object, amount: object) -> Requested:
        """A requester must be a canonical name, so that nobody can pass for an approver."""
        clean_purpose, clean_amount = inputs.purpose(purpose), inputs.amount(amount, most=self.policy.max_amount)
        user_id = call.conversation.user_id
        if not inputs.is_canonical_name(user_id):
            raise UnusableUserId(user_id)
        daily = None
        if clean_amount <= self.policy.rules.threshold:
            daily = await self.payouts.auto_approval_refusal(
                amount_cents=to_cents(clean_amount), **self._daily_rules(user_id, clean_purpose))
            if daily is None:
                raise NeedsNoApproval(clean_amount, self.policy.rules.threshold)
        conversation = call.conversation
        ticket = await self.tickets.open(
            app_name=conversation.app_name, user_id=user_id, session_id=conversation.session_id,
            call_id=call.call_id, call_name=APPROVAL_TOOL, purpose=clean_purpose,
            amount_cents=to_cents(clean_amount), ttl=self.policy.approval_ttl, session_store=call.session_store,
            note=daily.why if daily else None, message_id=call.message_id,
        )
        return Requested(ticket, daily_rules=daily.message if daily else None,
                         combined_with=tuple(await self.tickets.combined_with(ticket)),
                         tier_above=self.policy.rules.tiers[(ticket.tier or 1) - 1].above)

    async def reimburse(self, call: ToolCall, *, purpose: object, amount: object) -> tuple[Payout, bool]:
        """Pay an expense, above the threshold only through an approved ticket; returns (payout, already_paid)."""
        with self.watch.step("ledger.pay", session=call.conversation.session_id) as step:
            payout, already_paid = await self._pay(call, purpose=purpose, amount=amount)
            step.about(ticket=payout.ticket_id)
            step.note(amount=payout.amount, purpose=payout.purpose, paid=not already_paid)
            return payout, already_paid

    async def _pay(self, call: ToolCall, *, purpose: object, amount: object) -> tuple[Payout, bool]:
        clean_purpose, clean_amount = inputs.purpose(purpose), inputs.amount(amount, most=self.policy.max_amount)
        cents, conversation = to_cents(clean_amount), call.conversation
        if clean_amount > self.policy.rules.threshold:
            return await self.payouts.pay_approved(conversation=conversation, call_id=call.call_id,
                                                   purpose=clean_purpose, amount_cents=cents, prefer=call.resumed_by)
        return await self.payouts.pay_small(conversation=conversation, call_id=call.call_id, purpose=clean_purpose,
                                            amount_cents=cents,
                                            **self._daily_rules(conversation.user_id, clean_purpose))

    def _daily_rules(self, user_id: str, purpose: str) -> dict[str, Any]:
        """Whom and what the daily rules count a payout without approval against."""
        return {"requester": requester_of(user_id), "purpose_key": purpose_key(purpose),
                "daily_limit_cents": to_cents(self.policy.daily_auto_approval_limit)}

    async def evidence(self, ticket_id: str) -> dict[str, Any]:
        """One JSON document explaining the ticket: request, policy tier, decisions with evidence, payout, and
        whether its audit chain holds (audit/evidence.py)."""
        ticket = await self.tickets.get(ticket_id)
        verdict = await check.verify(self.database, [ticket_id])
        async with await self.database.session() as db:
            decisions = await evidence.decisions(db, ticket)
            groups = await db.scalar(select(TicketRow.request_groups).where(TicketRow.id == ticket_id))
        message = next((g.removeprefix("message:") for g in (groups or "").splitlines() if g.startswith("message:")),
                       None)
        rules = self.policy.rules  # the tier's amount as today's policy says it, if the ticket opened under it
        above = str(rules.tiers[ticket.tier - 1].above) if ticket.tier and ticket.policy_version == rules.version \
            else None
        chain = {"holds": verdict.holds, "first_break": str(verdict.first) if verdict.first else None,
                 "decisions_match": all(d["in_audit_chain"] for d in decisions)}
        return evidence.document(ticket, message_id=message, rules_version=self.policy.rules.version, tier_above=above,
                                 decisions=decisions, chain=chain,
                                 payouts=[p.as_record() for p in await self.payouts.find(ticket_id=ticket_id)])

    @property
    def engine(self) -> AsyncEngine:
        return self.database.engine

    def now(self) -> datetime:
        return self.database.now()

    async def prepare(self) -> tuple[str | None, str]:
        """Bring the tables to this code's schema (storage/migrate.py); returns (from, to)."""
        return await self.database.prepare()

    async def close(self) -> None:
        await self.database.close()
