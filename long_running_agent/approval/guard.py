"""The approval guard: checks every approval FunctionResponse against the ledger.

ADK resumes a long-running call for any FunctionResponse whose id matches, and
re-runs the invocation when the same response arrives twice. This plugin,
carried by the `App` to the CLI, `adk web`, `adk api_server` and `adk run`
alike, makes the ledger the authority instead of the message:

- a response whose ticket the ledger has decided (and not yet delivered) goes
  through as `ledger_answer(ticket)`: the ledger's own record, under the
  stored call's id and name, whatever payload the message carried;
- a question typed as the answer ("any news?" at `adk run`'s prompt or in
  the dev UI's answer box) about a ticket with nothing to deliver gets the
  ticket's news from the ledger, as the agent's note;
- anything else - a claim of a decision the ledger does not hold, a second
  delivery, a call without a ticket - is refused: the message is replaced by
  a record of what was sent (a thought, which ADK never sends to the model),
  and the agent answers with a note instead of running.

Every run first takes the conversation's lock (locks.py), so messages and
deliveries on one conversation queue instead of failing on ADK's stale-session
check, and a decision that reached the conversation is marked delivered by the
run that delivered it. Before answering a text message, the guard delivers any
decision the conversation is still owed (an expiry, or a decision made while
its store could not be reached).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from datetime import UTC
from types import MappingProxyType
from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.invocation_context import InvocationContext
from google.adk.apps import App
from google.adk.events import Event
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import Runner
from google.adk.sessions import DatabaseSessionService, InMemorySessionService, Session
from google.genai import types
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection

from ..adk_compat import STORED_SESSION_VERSION, in_memory_version
from ..ledger import Conversation, DatabaseFileGone, Ledger, LedgerError, Ticket, TicketStatus
from ..ledger.inputs import InputError
from ..ledger.locks import HeldLock
from ..names import APPROVAL_TOOL, ERROR, REIMBURSE_TOOL, PayoutStatus
from ..refusals import (
    AlreadyDelivered,
    LedgerUnusable,
    NoSuchCall,
    NotAcceptedAnswer,
    NotAnApproval,
    NoTicketForCall,
    SchemaError,
    StillPending,
    without_sql,
)
from ..services import services
from .notes import CHAT, already_delivered, as_sent, asks, claimed_status, news, refused_answer, unacceptable

logger = logging.getLogger(__name__)

# Marks the agent's refusal notes: people see them, the model is not shown
# them again (turn_order.py leaves them out of its requests).
NOTE_MARK = "approval_guard_note"

@dataclass(frozen=True)
class Holding:
    """A conversation the current task holds, and what it read under the lock: its open tickets by call id.

    `lock` is set when its holder (the courier's `deliver`) records the run's
    deliveries as it frees the conversation: one transaction for both.
    """

    lock: HeldLock | None = None
    tickets: Mapping[str, Ticket] = field(default_factory=dict)
    # Tickets known to have no payout when the lock was taken (decided in that very transaction).
    unpaid: frozenset[str] = frozenset()


# Conversations whose lock the current task holds (re-entrant: a delivery
# made while answering a message, or by deliver(), takes it once).
held_conversations: ContextVar[Mapping[Conversation, Holding]] = ContextVar(
    "held_conversations", default=MappingProxyType({}))


@contextmanager
def holding(
    conversation: Conversation, lock: HeldLock | None = None, tickets: Iterable[Ticket] = (),
    unpaid: Iterable[str] = (),
) -> Iterator[None]:
    """Mark `conversation` as held by the current task (its runs take no lock of their own)."""
    held = Holding(lock, {ticket.call_id: ticket for ticket in tickets}, frozenset(unpaid))
    token = held_conversations.set({**held_conversations.get(), conversation: held})
    try:
        yield
    finally:
        held_conversations.reset(token)


@dataclass
class _Run:
    invocation_id: str
    conversation: Conversation
    lock: HeldLock | None = None
    held_token: Token[Mapping[Conversation, Holding]] | None = None
    delivering: list[str] = field(default_factory=list)
    note: str | None = None
    # What the lock's transaction read: the conversation's open tickets, by call id.
    known: Mapping[str, Ticket] = field(default_factory=dict)
    # Tickets with no payout yet, as far as this run knows (see `known_unpaid`).
    unpaid: set[str] = field(default_factory=set)


_current_run: ContextVar[_Run | None] = ContextVar("approval_guard_run", default=None)


def known_unpaid(ticket_id: str) -> bool:
    """Whether the current run knows that `ticket_id` has no payout, without asking the ledger.

    True only for a ticket decided in the transaction that took this run's
    conversation, and not paid by this run since: nothing else can pay it
    while the conversation is held.
    """
    run = _current_run.get()
    return run is not None and ticket_id in run.unpaid


PAID = {PayoutStatus.PAID.value, PayoutStatus.ALREADY_PAID.value}


def paid_now(ticket_id: str | None) -> None:
    """`reimburse` paid `ticket_id` in the current run."""
    run = _current_run.get()
    if run is not None and ticket_id is not None:
        run.unpaid.discard(ticket_id)


def delivering_now() -> list[Ticket]:
    """The tickets whose decisions the current run delivers, as read under its lock: `reimburse` pays these first."""
    run = _current_run.get()
    if run is None:
        return []
    return [ticket for ticket in run.known.values() if ticket.id in run.delivering]


def conversation_of(context: InvocationContext) -> Conversation:
    return Conversation(context.session.app_name, context.session.user_id, context.session.id)


def ledger_answer(ticket: Ticket) -> types.FunctionResponse:
    """What the agent receives for an approval call: the ledger's record of `ticket`, with the call's id and name.

    The one answer the guard lets through, whatever the message said; the
    app's own deliveries send the same (`decision_message`), as main.py does.
    """
    return types.FunctionResponse(id=ticket.call_id, name=ticket.call_name, response=ticket.as_response())


def decision_message(ticket: Ticket) -> types.Content:
    """The updated FunctionResponse for `ticket`, as a message: same id and name as the original call."""
    return types.Content(role="user", parts=[types.Part(function_response=ledger_answer(ticket))])


def running_app(context: InvocationContext) -> App:
    """The app this run is: the same agent, model and plugins, to deliver with from inside it."""
    return App(name=context.session.app_name, root_agent=context.agent,
               plugins=list(context.plugin_manager.plugins))


def holds_call(session: Session, call_id: str) -> bool:
    """Whether `session` holds the function call `call_id`: ADK resumes only a call the session holds."""
    return any(call.id == call_id for event in session.events for call in event.get_function_calls())


def call_gone(ticket: Ticket, where: str = "") -> str:
    """Why a decision cannot reach a conversation that exists but no longer holds the ticket's call."""
    place = f" in {where}" if where else ""
    return (f"conversation {ticket.session_id} of {ticket.user_id}{place} no longer holds the call "
            f"{ticket.call_id} that ticket {ticket.id} answers (it was deleted and started again)")


def _session_version(context: InvocationContext, ledger: Ledger) -> Any:
    """A read of the stored session's version, to make in the transaction that takes the lock.

    The loaded session is fresh if the stored one is still at its version, as
    ADK's own stale-session check judges: `update_time` in the ledger's own
    database, `last_update_time` in memory. None (always reload) for a store
    elsewhere.
    """
    service, session = context.session_service, context.session
    if isinstance(service, InMemorySessionService):
        async def in_memory(_db: AsyncConnection) -> float | None:
            return in_memory_version(service, session.app_name, session.user_id, session.id)

        return in_memory
    if (not isinstance(service, DatabaseSessionService) or service.db_engine is not ledger.engine
            or STORED_SESSION_VERSION is None):
        return None
    query = STORED_SESSION_VERSION

    async def read(db: AsyncConnection) -> float | None:
        stored = await db.scalar(query, {"app_name": session.app_name, "user_id": session.user_id,
                                         "session_id": session.id})
        if stored is None:
            return None
        return (stored if stored.tzinfo else stored.replace(tzinfo=UTC)).timestamp()

    return read


def _stored_call(context: InvocationContext, call_id: str | None) -> types.FunctionCall | None:
    for event in reversed(context.session.events):
        for call in event.get_function_calls():
            if call.id == call_id:
                return call
    return None


class CallNotHeld(Exception):
    """A delivery's conversation does not hold the call its decision answers."""


# What the ledger's database raises when it cannot be used at all: down, gone, or at another schema.
UNUSABLE = (SQLAlchemyError, OSError, DatabaseFileGone, SchemaError)


def unusable_note(error: BaseException) -> str:
    """What the chat is told when the ledger's database cannot be used (no SQL, no traceback)."""
    why = error.sentence(CHAT) if isinstance(error, (SchemaError, DatabaseFileGone)) else \
        without_sql(f"{type(error).__name__}: {error}")
    return LedgerUnusable(why or "unknown").sentence(CHAT)


class ApprovalGuard(BasePlugin):
    """Lets an approval resume the agent only as the ledger records it, and only once."""

    def __init__(self) -> None:
        super().__init__(name="approval_guard")

    # --- the run's start: lock, catch up, check ---------------------------------

    async def on_user_message_callback(
        self, *, invocation_context: InvocationContext, user_message: types.Content
    ) -> types.Content | None:
        try:
            return await self._check(invocation_context, user_message)
        except UNUSABLE as error:
            # The ledger's database cannot be used: the agent says so instead of running,
            # and a FunctionResponse in the message is kept as a thought, never acted on.
            logger.warning("The ledger cannot be used for a message: %s", without_sql(str(error)))
            run = _current_run.get()
            if run is not None:
                run.delivering.clear()
                run.note = unusable_note(error)
            responses = [p.function_response for p in user_message.parts or [] if p.function_response]
            return types.Content(role="user", parts=[types.Part(text=as_sent(responses), thought=True)]) \
                if responses else None

    async def after_tool_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any, result: dict[str, Any]
    ) -> dict[str, Any] | None:
        """`reimburse` paid a ticket in this run: the run no longer counts it as unpaid."""
        if tool.name == REIMBURSE_TOOL and isinstance(result, dict) and result.get("status") in PAID:
            paid_now(result.get("ticket_id"))
        return None

    async def on_tool_error_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any, error: Exception
    ) -> dict[str, Any] | None:
        """A tool that cannot reach the ledger answers so, for the model to tell; never SQL, never a 500."""
        if not isinstance(error, UNUSABLE):
            return None
        logger.warning("%s could not use the ledger: %s", tool.name, without_sql(str(error)))
        return {"status": ERROR, "error": unusable_note(error)}

    async def _check(
        self, invocation_context: InvocationContext, user_message: types.Content
    ) -> types.Content | None:
        conversation = conversation_of(invocation_context)
        run = _Run(invocation_context.invocation_id, conversation)
        _current_run.set(run)
        ledger = services().ledger
        held = held_conversations.get().get(conversation)
        if held is None:
            session_read = _session_version(invocation_context, ledger)
            open_read = ledger.deliveries.read_open_in(conversation)

            async def read(db: AsyncConnection) -> tuple[list[Ticket], Any]:
                return await open_read(db), (await session_read(db) if session_read else None)

            run.lock = await ledger.locks.acquire(conversation, purpose="a message", read=read)
            open_tickets, version = run.lock.found
            run.known = {ticket.call_id: ticket for ticket in open_tickets}
            run.held_token = held_conversations.set(
                {**held_conversations.get(), conversation: Holding(tickets=run.known)})
            # ADK loaded the session before this run took the lock: it is reloaded only if another
            # run may have written to it since (the lock was busy, or its stored version moved).
            if run.lock.waited or version is None or version != invocation_context.session.last_update_time:
                await self._refresh(invocation_context)
        else:
            run.known = held.tickets
            run.unpaid = set(held.unpaid)

        responses = [p.function_response for p in user_message.parts or [] if p.function_response]
        if held is not None and held.lock is not None and any(
                not holds_call(invocation_context.session, response.id or "") for response in responses):
            # A delivery to a conversation that no longer holds the call (deleted and started
            # again): nothing is written to it, and the courier records why (courier.py).
            raise CallNotHeld()
        if problem := unacceptable(invocation_context, user_message):
            note, kept = problem
            run.note = note
            return kept
        if not responses:
            await self._deliver_owed(invocation_context, ledger, conversation, run.known.values())
            return None
        try:
            answers = [await self._authoritative(invocation_context, ledger, run, r) for r in responses]
        except (NotAcceptedAnswer, StillPending, AlreadyDelivered) as refusal:
            run.delivering.clear()
            run.note = refused_answer(refusal)
            return types.Content(role="user", parts=[types.Part(text=as_sent(responses), thought=True)])
        parts = [answer for answer in answers if isinstance(answer, types.Part)]
        if parts:
            return types.Content(role="user", parts=parts)
        # Only questions, about tickets with nothing to deliver: the agent answers with their news.
        run.note = " ".join(answer for answer in answers if isinstance(answer, str))
        return types.Content(role="user", parts=[types.Part(text=as_sent(responses), thought=True)])

    async def before_agent_callback(
        self, *, agent: Any, callback_context: CallbackContext
    ) -> types.Content | None:
        run = _current_run.get()
        if run is None or run.note is None or run.invocation_id != callback_context.invocation_id:
            return None
        # The agent answers with the note instead of running: authored by the
        # agent, so the dev UI shows it as the agent's reply.
        return types.Content(role="model", parts=[types.Part(text=run.note)])

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> Event | None:
        run = _current_run.get()
        if run is None or run.note is None or event.author == "user":
            return None
        parts = event.content.parts if event.content and event.content.parts else []
        if any(part.text == run.note for part in parts):
            return event.model_copy(update={"custom_metadata": {**(event.custom_metadata or {}), NOTE_MARK: True}})
        return None

    # --- the run's end: record the delivery, free the conversation ---------------

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        run = self._finish()
        if run is None:
            return
        # Recorded in the transaction that frees the conversation: this run's own lock, or
        # the lock of the delivery that runs it (approval/courier.py).
        held = held_conversations.get().get(run.conversation)
        lock = run.lock or (held.lock if held is not None else None)
        try:
            if lock is not None:
                lock.deliveries.extend(run.delivering)
            else:
                ledger = services().ledger
                for ticket_id in run.delivering:
                    await ledger.deliveries.mark_delivered(ticket_id, actor="approval_guard")
        finally:
            await self._release(run)

    async def on_run_error_callback(
        self, *, invocation_context: InvocationContext, error: Exception
    ) -> None:
        run = self._finish()
        if run is None:
            return
        try:
            ledger = services().ledger
            for ticket_id in run.delivering:
                await ledger.deliveries.mark_undelivered(
                    ticket_id, actor="approval_guard", error=f"the run failed: {type(error).__name__}: {error}"
                )
        except Exception:
            logger.warning("Could not record the failed delivery of %s", run.delivering, exc_info=True)
        finally:
            await self._release(run)

    def _finish(self) -> _Run | None:
        run = _current_run.get()
        _current_run.set(None)
        return run

    async def _release(self, run: _Run) -> None:
        if run.held_token is not None:
            held_conversations.reset(run.held_token)
        if run.lock is not None:
            try:
                await run.lock.release()
            except UNUSABLE as error:  # the lease lapses by itself (locks.py)
                logger.warning("Could not release the lock on %s: %s", run.conversation, without_sql(str(error)))
                if run.lock.deliveries:
                    raise

    # --- helpers -------------------------------------------------------------------

    async def _refresh(self, context: InvocationContext) -> None:
        # ADK loaded the session before this run waited for the lock; another
        # run may have added events since, and appending to a stale copy fails.
        fresh = await context.session_service.get_session(
            app_name=context.session.app_name, user_id=context.session.user_id, session_id=context.session.id
        )
        if fresh is not None:
            context.session = fresh

    async def _deliver_owed(
        self, context: InvocationContext, ledger: Ledger, conversation: Conversation, open_tickets: Iterable[Ticket]
    ) -> None:
        """Deliver what this conversation is owed before answering its new message.

        `open_tickets`: its pending and undelivered tickets, read under its lock.
        """
        now = ledger.now()
        due = [t for t in open_tickets if t.status is TicketStatus.PENDING and t.expires_at <= now]
        if due:
            await ledger.tickets.expire_due(conversation=conversation)
            owed = await ledger.deliveries.undelivered(conversation)
        else:
            owed = sorted((t for t in open_tickets if t.decided_at is not None),
                          key=lambda t: (t.decided_at, t.id))
        if not owed:
            return
        # The same agent, model and plugins as this run, on the same store.
        runner = Runner(app=running_app(context), session_service=context.session_service)
        saved = _current_run.get()
        try:
            for ticket in owed:
                if not holds_call(context.session, ticket.call_id):
                    # Deleted and started again under the same id: ADK would refuse the decision
                    # and this message with it. Recorded once, so an approver can settle the ticket.
                    why = call_gone(ticket)
                    if ticket.delivery_error != why:
                        await ledger.deliveries.mark_undelivered(ticket.id, actor="approval_guard", error=why)
                    continue
                try:
                    async for _event in runner.run_async(
                        user_id=conversation.user_id, session_id=conversation.session_id,
                        new_message=decision_message(ticket),
                    ):
                        pass
                except Exception as error:  # recorded; the person's own message is still answered
                    logger.warning("Delivering %s before a message failed: %s: %s", ticket.id,
                                   type(error).__name__, error)
                    # A failure inside the run is recorded by that run's guard; one before it, here.
                    if (await ledger.tickets.get(ticket.id)).delivery_error == ticket.delivery_error:
                        await ledger.deliveries.mark_undelivered(ticket.id, actor="approval_guard",
                                                      error=f"{type(error).__name__}: {error}")
        finally:
            _current_run.set(saved)
        await self._refresh(context)

    async def _authoritative(
        self, context: InvocationContext, ledger: Ledger, run: _Run,
        response: types.FunctionResponse,
    ) -> types.Part | str:
        """What the agent receives for `response`: the ledger's answer, or (for a question) the ticket's news."""
        # Trust the session, not the message: ADK matches on id only, so the
        # name comes from the stored call and the decision from the ledger.
        call = _stored_call(context, response.id)
        if call is None:
            raise NoSuchCall(response.id)
        if call.name != APPROVAL_TOOL:
            raise NotAnApproval(call.name)
        # Read under the conversation's lock by this run or the delivery running it; else, a
        # ticket that is no longer open (already delivered or settled), read now.
        ticket = run.known.get(call.id or "") or await ledger.tickets.find_by_call(run.conversation, call.id or "")
        if ticket is None:
            raise NoTicketForCall()
        ticket = await self._bring_up_to_date(ledger, ticket, response, context)
        if asks(response) and (ticket.status is TicketStatus.PENDING or ticket.delivered_at or ticket.settled_at):
            return await news(ledger, ticket)
        if ticket.status is TicketStatus.PENDING:
            await ledger.tickets.record_refusal(
                ticket.id, actor=context.session.user_id,
                detail=f"response claiming {claimed_status(response)!r} while pending",
            )
            raise StillPending(ticket.id)
        if ticket.delivered_at or ticket.settled_at:
            raise await already_delivered(ledger, ticket)
        run.delivering.append(ticket.id)
        # The ticket was opened by this very call (find_by_call): its id and name are the stored call's.
        return types.Part(function_response=ledger_answer(ticket))

    async def _bring_up_to_date(
        self, ledger: Ledger, ticket: Ticket, response: types.FunctionResponse,
        context: InvocationContext,
    ) -> Ticket:
        """Bring a pending ticket up to date: expire it, or (dev only) decide it from chat."""
        if ticket.status is not TicketStatus.PENDING:
            return ticket
        if ticket.expires_at <= ledger.now():
            try:
                return await ledger.tickets.expire(ticket.id)
            except LedgerError:
                return await ledger.tickets.get(ticket.id)
        claimed = claimed_status(response)
        if services().settings.dev_chat_approval and claimed in (TicketStatus.APPROVED, TicketStatus.REJECTED):
            # DEV_CHAT_APPROVAL: the chat answer box acts as an approver, and
            # the ledger records it as such. Never enable this in production.
            try:
                return await ledger.tickets.decide(
                    ticket.id,
                    approver=context.session.user_id,
                    approve=claimed == TicketStatus.APPROVED,
                    reason="decided in the chat with DEV_CHAT_APPROVAL on",
                    from_chat=True,
                )
            except (LedgerError, InputError):
                return await ledger.tickets.get(ticket.id)
        return ticket


