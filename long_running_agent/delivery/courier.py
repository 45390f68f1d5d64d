"""The courier: the one way a decision reaches its conversation, and the one place that records how that went.

The ledger is written first; the FunctionResponse is then rebuilt from the ledger's stored call id and name and sent
to the store the conversation lives in (conversations.py), so a decision made days later, in another process,
resumes the right call. One `Courier`, built from the desk, serves every surface that decides (the API and inbox,
the CLI, Slack), the sweep, the approval guard (what a conversation is owed before its next message) and the
withdrawal tool. Each attempt ends in a `Delivery`: what happened and, if it did not arrive, why (docs/delivery.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TYPE_CHECKING

from google.adk.agents.invocation_context import InvocationContext, new_invocation_context_id
from google.adk.apps import App
from google.adk.events import Event
from google.adk.runners import Runner
from google.genai import types
from sqlalchemy.ext.asyncio import AsyncConnection

from ..ledger import Conversation, Ticket, TicketExpired, TicketStatus
from ..ledger.audit.evidence import Via
from ..ledger.storage.locks import DEFAULT_WAIT, ConversationBusy, HeldLock, new_holder
from ..ledger.tickets import row_of
from ..names import AGENT_NAME, Outcome, store_in_words
from ..observability.spans import Step
from ..refusals import Refusal
from ..refusals.answers import AlreadyDelivered, NotDelivered, StillPending
from .conversations import Unreachable, conversation_of, open_store, refresh
from .decisions import call_gone, decision_message, holds_call
from .holding import Holding, holding_app, running_app
from .notes import NOTE_MARK

if TYPE_CHECKING:
    from ..desk import Desk

logger = logging.getLogger(__name__)
GUARD = "approval_guard"  # the actor of what the guard's runs deliver


@dataclass(frozen=True)
class Delivery:
    """What became of one attempt to deliver a ticket's decision."""

    ticket: Ticket
    outcome: Outcome
    detail: str = ""
    where: str = ""
    events: list[Event] = field(default_factory=list)
    retry_after: timedelta | None = None

    @property
    def delivered(self) -> bool:
        return self.outcome is Outcome.DELIVERED

    @property
    def refusal(self) -> Refusal:
        """Why the decision is not in the conversation now, and what to do (refusals/)."""
        if self.outcome is Outcome.STILL_PENDING:
            return StillPending(self.ticket.id)
        if self.outcome in (Outcome.ALREADY_DELIVERED, Outcome.SETTLED):
            return AlreadyDelivered(self.ticket)
        return NotDelivered(self.outcome, self.ticket, self.detail, self.where, self.retry_after)


def note_decision(step: Step, ticket: Ticket, channel: str) -> None:
    """What a decision tells the metrics: its outcome, through which surface, and how long the request waited."""
    step.about(session=ticket.session_id)
    if ticket.status is not TicketStatus.PENDING and ticket.decided_at is not None:
        step.note(outcome=ticket.status.value, channel=channel,
                  waited_seconds=(ticket.decided_at - ticket.created_at).total_seconds())


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}".strip()


class Courier:
    """Takes the ledger's decisions, withdrawals and progress into their conversations, and records each attempt."""

    def __init__(self, desk: Desk) -> None:
        self.desk = desk

    async def decide(
        self, ticket_id: str, *, approver: str, approve: bool, reason: str | None = None, amount: object = None,
        app: App | None = None, channel: str = "api", principal: dict[str, str] | None = None, shown: str | None = None,
    ) -> Delivery:
        """Record the decision, then deliver it; raises LedgerError if the decision is refused.

        An expired ticket is refused, but its expiry is still delivered, so the requester learns what happened.
        `channel`: the surface it came through (api, inbox, cli, slack), `principal`: who that surface authenticated,
        `shown`: the digest of the ticket the approver was shown (ledger/audit/evidence.py): its evidence and metrics.
        """
        ledger = self.desk.ledger
        taken: list[str] = []

        async def take_conversation(db: AsyncConnection, decided: Ticket) -> None:
            # The delivery's lock, taken in the deciding transaction if the conversation is free.
            holder = new_holder()
            if await ledger.locks.take_in(db, decided.conversation, holder, f"delivering {decided.id}"):
                taken.append(holder)

        try:
            with self.desk.watch.step("ledger.decide", ticket=ticket_id) as step:
                ticket = await ledger.tickets.decide(
                    ticket_id, approver=approver, approve=approve, reason=reason, amount=amount,
                    then=take_conversation, via=Via(channel, principal or {"approver": approver}, shown))
                note_decision(step, ticket, channel)
        except TicketExpired:
            await self.deliver(ticket_id, actor=approver, app=app)
            raise
        if taken:
            return await self._delivered(ticket, actor=approver, app=app,
                                         lock=ledger.locks.held(ticket.conversation, taken[0]))
        if ticket.status is TicketStatus.PENDING:
            # An approval short of the tier's need: the requester sees the progress; later approvers decide.
            told = await self.tell(ticket, f"{ticket.approvers[-1]} approved ticket {ticket.id} "
                                           f"({ticket.still_missing}).")
            return Delivery(ticket, Outcome.WAITING, "told the conversation" if told else "not told the conversation")
        return await self._delivered(ticket, actor=approver, app=app)

    async def withdraw(self, ticket_id: str, *, requester: str, app: App | None = None,
                       channel: str = "api") -> Delivery:
        """The requester withdraws a pending request; the pending call is answered "withdrawn"."""
        try:
            with self.desk.watch.step("ledger.decide", ticket=ticket_id) as step:
                ticket = await self.desk.ledger.tickets.withdraw(ticket_id, requester=requester)
                note_decision(step, ticket, channel)
        except TicketExpired:
            await self.deliver(ticket_id, actor=requester, app=app)
            raise
        return await self._delivered(ticket, actor=requester, app=app)

    async def _delivered(self, ticket: Ticket, *, actor: str, app: App | None, lock: HeldLock | None = None,
                         ) -> Delivery:
        delivery = await self.deliver(ticket.id, actor=actor, app=app, decided=ticket if lock else None, lock=lock)
        if delivery.outcome is Outcome.ALREADY_DELIVERED:
            # A message in the same conversation got the lock first and delivered
            # this new decision before answering: it arrived, once.
            return Delivery(delivery.ticket, Outcome.DELIVERED, "delivered by another run of the conversation",
                            delivery.where)
        return delivery

    async def deliver(
        self, ticket_id: str, *, actor: str, wait: timedelta = DEFAULT_WAIT, app: App | None = None,
        decided: Ticket | None = None, lock: HeldLock | None = None,
    ) -> Delivery:
        """Send the ledger's decision on `ticket_id` to its conversation, once, running `app` (default: the desk's).

        Every failed attempt but a busy conversation is recorded. `decided` and `lock`: the ticket as just decided,
        and its conversation taken in that very transaction (`decide`).
        """
        with self.desk.watch.step("courier.deliver", ticket=ticket_id) as step:  # ADK's run of the agent nests in it
            try:
                delivery = await self._deliver(ticket_id, actor=actor, wait=wait, app=app, decided=decided, lock=lock)
            finally:
                if lock is not None and decided is not None:
                    await lock.release()  # taken with the decision, and never used (a no-op once released)
            step.about(session=delivery.ticket.session_id)
            step.note(delivery=delivery.outcome.value)
            return delivery

    async def _deliver(self, ticket_id: str, *, actor: str, wait: timedelta, app: App | None,
                       decided: Ticket | None, lock: HeldLock | None) -> Delivery:
        ledger = self.desk.ledger
        ticket = decided or await ledger.tickets.get(ticket_id)
        if ticket.status is TicketStatus.PENDING:
            return Delivery(ticket, Outcome.STILL_PENDING)
        if ticket.delivered_at or ticket.settled_at:
            return Delivery(ticket, Outcome.ALREADY_DELIVERED if ticket.delivered_at else Outcome.SETTLED)
        where = store_in_words(ticket.session_store)
        try:
            store = open_store(self.desk, ticket.session_store)
        except Unreachable as unreachable:
            await self.failed(ticket.id, actor, str(unreachable))
            return Delivery(ticket, Outcome.UNREACHABLE, unreachable.why, where)
        except Exception as error:  # e.g. a database URL this process has no driver for
            why = f"the session store cannot be opened: {_error_text(error)}"
            await self.failed(ticket.id, actor, why)
            return Delivery(ticket, Outcome.UNREACHABLE, why, where)
        try:
            if lock is None:
                # Read again in the transaction that takes the lock: another process may have delivered it.
                async def read(db: AsyncConnection) -> Ticket:
                    return Ticket.of(await row_of(db, ticket_id))

                lock = await ledger.locks.acquire(ticket.conversation, purpose=f"delivering {ticket.id}", wait=wait,
                                                  read=read)
                ticket = lock.found
                if ticket.delivered_at or ticket.settled_at:  # done meanwhile: the conversation is free again
                    await lock.release()
                    return Delivery(ticket, Outcome.ALREADY_DELIVERED if ticket.delivered_at else Outcome.SETTLED)
            try:
                # A ticket decided in the transaction that took the lock has no payout yet.
                held = Holding(ticket.conversation, lock, {ticket.call_id: ticket},
                               frozenset([ticket.id]) if decided else frozenset())
                runner = self.desk.runner(store, holding_app(app or self.desk.app, held))
                events = [event async for event in runner.run_async(
                    user_id=ticket.user_id, session_id=ticket.session_id, new_message=decision_message(ticket))]
            except Exception:
                # ADK refuses a conversation that is gone, or no longer holds the call; only then
                # is it read here, to say so (the run itself reads it on the way in).
                session = await store.get_session(
                    app_name=ticket.app_name, user_id=ticket.user_id, session_id=ticket.session_id)
                gone = (f"conversation {ticket.session_id} of {ticket.user_id} is not in {where}" if session is None
                        else None if holds_call(session, ticket.call_id) else call_gone(ticket, where))
                if gone:
                    await self.failed(ticket.id, actor, gone)
                    return Delivery(ticket, Outcome.CONVERSATION_MISSING, gone, where)
                raise
            finally:
                await lock.release()
        except ConversationBusy as busy:
            return Delivery(ticket, Outcome.BUSY, str(busy), where, retry_after=busy.retry_after)
        except Exception as error:  # the store, the model, the network or ADK itself failed mid-run
            why = _error_text(error)
            logger.warning("Delivering %s to %s failed: %s", ticket_id, where, why)
            logger.debug("Delivering %s failed", ticket_id, exc_info=True)
            await self.failed(ticket.id, actor, why, since=ticket)
            return Delivery(ticket, Outcome.FAILED, why, where)
        if ticket.id in lock.delivered:
            return Delivery(replace(ticket, delivered_at=ledger.now()), Outcome.DELIVERED, where=where, events=events)
        ticket = await ledger.tickets.get(ticket_id)
        if ticket.delivered_at:
            return Delivery(ticket, Outcome.DELIVERED, where=where, events=events)
        return Delivery(ticket, Outcome.FAILED, ticket.delivery_error or "the agent did not accept it", where,
                        events=events)

    async def owed(self, context: InvocationContext, conversation: Conversation, known: Mapping[str, Ticket],
                   open_tickets: Iterable[Ticket]) -> None:
        """Deliver what a conversation is owed before its new message is answered, inside the run that holds it
        (the approval guard's); `open_tickets`, `known`: its open tickets, read under its lock."""
        ledger = self.desk.ledger
        if any(t.status is TicketStatus.PENDING and t.expires_at <= ledger.now() for t in open_tickets):
            if expired := await ledger.tickets.expire_due(conversation=conversation):
                ledger.watch.tell("ledger.expire", outcome="expired", channel="sweep", count=len(expired))
            owed = await ledger.deliveries.undelivered(conversation)
        else:
            owed = sorted((t for t in open_tickets if t.decided_at is not None), key=lambda t: (t.decided_at, t.id))
        if not owed:
            return
        runner = Runner(app=holding_app(running_app(context), Holding(conversation, tickets=known)),
                        session_service=context.session_service)
        for ticket in owed:
            if not holds_call(context.session, ticket.call_id):
                # Deleted and started again under the same id: ADK would refuse the decision
                # and this message with it. Recorded once, so an approver can settle the ticket.
                if ticket.delivery_error != (why := call_gone(ticket)):
                    await self.failed(ticket.id, GUARD, why)
                continue
            try:
                async for _event in runner.run_async(user_id=conversation.user_id, session_id=conversation.session_id,
                                                     new_message=decision_message(ticket)):
                    pass
            except Exception as error:  # recorded; the person's own message is still answered
                logger.warning("Delivering %s before a message failed: %s", ticket.id, _error_text(error))
                await self.failed(ticket.id, GUARD, _error_text(error), since=ticket)
        await refresh(context)

    async def tell(self, ticket: Ticket, note: str) -> bool:
        """Tell a ticket's conversation of something short of a decision, without a model turn; False if unreachable.

        The pending call gets the ledger's record, still "pending", and the agent a note the model is not shown.
        """
        ledger = self.desk.ledger
        try:
            store = open_store(self.desk, ticket.session_store)
            async with ledger.locks.hold(ticket.conversation, purpose=f"progress on {ticket.id}", wait=DEFAULT_WAIT):
                session = await store.get_session(
                    app_name=ticket.app_name, user_id=ticket.user_id, session_id=ticket.session_id)
                if session is None or not holds_call(session, ticket.call_id):
                    return False  # gone, or started again without the call: the delivery will record it
                invocation_id = new_invocation_context_id()
                await store.append_event(session, Event(
                    invocation_id=invocation_id, author="user", content=decision_message(ticket)))
                await store.append_event(session, Event(
                    invocation_id=invocation_id, author=AGENT_NAME,
                    content=types.Content(role="model", parts=[types.Part(text=note)]),
                    custom_metadata={NOTE_MARK: True}))
            return True
        except Unreachable:
            return False
        except Exception:  # a busy or failing store: the decision will carry the news
            logger.warning("Could not tell conversation %s of progress on %s", ticket.session_id, ticket.id,
                           exc_info=True)
            return False

    async def answer_withdrawal(self, ticket: Ticket, context: InvocationContext) -> None:
        """Answer the pending call of a ticket withdrawn in the chat with its "withdrawn" record.

        In this run's conversation the answer is appended directly, with no second run, and the model tells the user
        in this run's reply; a ticket of another conversation is delivered there.
        """
        with self.desk.watch.step("ledger.decide", ticket=ticket.id) as step:  # the chat's withdrawal, for metrics
            note_decision(step, ticket, "chat")
        if ticket.conversation != conversation_of(context):
            await self.deliver(ticket.id, actor=ticket.user_id, app=running_app(context))
            return
        answer = Event(invocation_id=context.invocation_id, author="user", content=decision_message(ticket))
        await context.session_service.append_event(context.session, answer)
        await self.arrived([ticket.id], actor=ticket.user_id)

    async def arrived(self, ticket_ids: Iterable[str], *, actor: str) -> None:
        """Record decisions that reached their conversation outside a courier's lock."""
        for ticket_id in ticket_ids:
            await self.desk.ledger.deliveries.mark_delivered(ticket_id, actor=actor)

    async def failed(self, ticket_id: str, actor: str, why: str, *, since: Ticket | None = None) -> None:
        """Record a failed attempt, never raising: the caller still tells why. With `since` (the ticket as read before
        the attempt), not if a failure was recorded since: one inside the run is recorded by that run's guard."""
        ledger = self.desk.ledger
        try:
            if since is not None and (await ledger.tickets.get(ticket_id)).delivery_error != since.delivery_error:
                return
            await ledger.deliveries.mark_undelivered(ticket_id, actor=actor, error=why)
        except Exception as error:  # the ledger itself is down
            logger.warning("Could not record the failed delivery of %s (%s): %s", ticket_id, why, type(error).__name__)
