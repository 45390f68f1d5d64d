"""The approval guard: checks every approval FunctionResponse against the ledger, and refuses one that disagrees.

ADK resumes a long-running call for any FunctionResponse whose id matches, and re-runs the invocation when the same
response arrives twice. This plugin, carried by the `App` to every surface, makes the ledger the authority: a
response that agrees reaches the model as sent; a question typed as the answer gets the ticket's news; anything else
is kept as a thought (which ADK never sends to the model) and the agent answers with a note naming what disagreed.
A `Refusal` a tool raises becomes that tool's answer, worded for the chat (`on_tool_error_callback`).
Every run first takes the conversation's lock, so runs on one conversation queue instead of failing ADK's
stale-session check (docs/security.md#the-guard, docs/delivery.md).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.invocation_context import InvocationContext
from google.adk.events import Event
from google.adk.plugins.base_plugin import BasePlugin
from google.genai import types
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection

from ..error_text import without_sql
from ..ledger import DatabaseFileGone, LedgerError, Ticket, TicketStatus
from ..ledger.audit.evidence import Via
from ..ledger.inputs import InputError
from ..names import APPROVAL_TOOL, ERROR, REIMBURSE_TOOL, PayoutStatus
from ..refusals import Refusal
from ..refusals.answers import (
    AlreadyDelivered,
    AnswerDisagrees,
    NoSuchCall,
    NotAcceptedAnswer,
    NotAnApproval,
    NoTicketForCall,
    StillPending,
)
from ..refusals.rules import LedgerUnusable
from ..refusals.startup import SchemaError
from .conversations import conversation_of, refresh, session_version
from .courier import GUARD, Courier
from .decisions import claimed_status, disagreement, holds_call, stored_call
from .holding import Holding
from .notes import (
    CHAT,
    NOTE_MARK,
    already_delivered,
    asks,
    news,
    record_of,
    refused_answer,
    tool_error,
    unacceptable,
)
from .run import ApprovalRun, finish_run, found_run, start_run

if TYPE_CHECKING:
    from ..desk import Desk

logger = logging.getLogger(__name__)

PAID = {PayoutStatus.PAID.value, PayoutStatus.ALREADY_PAID.value}
# What the ledger's database raises when it cannot be used at all: down, gone, or at another schema.
UNUSABLE = (SQLAlchemyError, OSError, DatabaseFileGone, SchemaError)


def unusable_note(error: BaseException) -> str:
    """What the chat is told when the ledger's database cannot be used (no SQL, no traceback)."""
    why = error.sentence(CHAT) if isinstance(error, (SchemaError, DatabaseFileGone)) else \
        without_sql(f"{type(error).__name__}: {error}")
    return LedgerUnusable(why or "unknown").sentence(CHAT)


class CallNotHeld(Exception):
    """A delivery's conversation does not hold the call its decision answers."""


class ApprovalGuard(BasePlugin):
    """Lets an approval resume the agent only when it agrees with the ledger, and only once."""

    def __init__(self, desk: Desk, holding: Holding | None = None) -> None:
        super().__init__(name=GUARD)
        self.desk = desk
        self.courier = Courier(desk)  # what this conversation is owed goes through it before its next message
        self.holding = holding

    def holding_for(self, holding: Holding) -> ApprovalGuard:
        """This guard, for a run inside `holding`: it takes no lock of its own there."""
        return ApprovalGuard(self.desk, holding)

    async def on_user_message_callback(
        self, *, invocation_context: InvocationContext, user_message: types.Content
    ) -> types.Content | None:
        run = start_run(invocation_context, ApprovalRun(
            self.desk, conversation_of(invocation_context), invocation_context.invocation_id))
        try:
            return await self._check(invocation_context, run, user_message)
        except UNUSABLE as error:
            # The ledger's database cannot be used: the agent says so instead of running,
            # and a FunctionResponse in the message is kept as a thought, never acted on.
            logger.warning("The ledger cannot be used for a message: %s", without_sql(str(error)))
            run.delivering.clear()
            run.note = unusable_note(error)
            return record_of(user_message) if any(p.function_response for p in user_message.parts or []) else None

    async def before_run_callback(self, *, invocation_context: InvocationContext) -> types.Content | None:
        # A run with no new message (ADK re-running an invocation) still hands its tools the desk.
        if found_run(invocation_context) is None:
            start_run(invocation_context, ApprovalRun(
                self.desk, conversation_of(invocation_context), invocation_context.invocation_id))
        return None

    async def _check(
        self, context: InvocationContext, run: ApprovalRun, user_message: types.Content
    ) -> types.Content | None:
        held = self.holding if self.holding and self.holding.conversation == run.conversation else None
        if held is None:
            await self._take_conversation(context, run)
        else:
            run.held, run.known, run.unpaid = held, held.tickets, set(held.unpaid)

        responses = [p.function_response for p in user_message.parts or [] if p.function_response]
        if held is not None and held.lock is not None and any(
                not holds_call(context.session, response.id or "") for response in responses):
            # A delivery to a conversation that no longer holds the call (deleted and started
            # again): nothing is written to it, and the courier records why (courier.py).
            raise CallNotHeld()
        if problem := unacceptable(context, user_message):
            run.note, kept = problem
            return kept
        if not responses:
            await self.courier.owed(context, run.conversation, run.known, run.known.values())
            return None
        try:
            questions = [await self._checked(context, run, response) for response in responses]
        except (NotAcceptedAnswer, StillPending, AlreadyDelivered) as refusal:
            run.delivering.clear()
            run.note = refused_answer(refusal)
            return record_of(user_message)
        if not any(questions):
            return None  # every response agrees with the ledger: it reaches the model as sent
        if not all(questions):
            run.delivering.clear()
            run.note = refused_answer(NotAcceptedAnswer(
                "A question about a ticket and a decision came in one message.",
                next_step="Ask about a ticket in a message of its own."))
            return record_of(user_message)
        # Only questions, about tickets with nothing to deliver: the agent answers with their news.
        run.note = " ".join(question for question in questions if question)
        return record_of(user_message)

    async def _take_conversation(self, context: InvocationContext, run: ApprovalRun) -> None:
        """Take the conversation's lock, reading its open tickets (and its stored version) in that transaction."""
        ledger = run.ledger
        session_read = session_version(context, ledger)
        open_read = ledger.deliveries.read_open_in(run.conversation)

        async def read(db: AsyncConnection) -> tuple[list[Ticket], Any]:
            return await open_read(db), (await session_read(db) if session_read else None)

        run.lock = await ledger.locks.acquire(run.conversation, purpose="a message", read=read)
        open_tickets, version = run.lock.found
        run.known = {ticket.call_id: ticket for ticket in open_tickets}
        # ADK loaded the session before this run took the lock: it is reloaded only if another
        # run may have written to it since (the lock was busy, or its stored version moved).
        if run.lock.waited or version is None or version != context.session.last_update_time:
            await refresh(context)

    async def _checked(self, context: InvocationContext, run: ApprovalRun, response: types.FunctionResponse,
                       ) -> str | None:
        """None when `response` agrees with the ledger (it is delivered), the news for a question; else raises."""
        # Trust the session, not the message: ADK matches on id only, so the call
        # comes from the session and the decision from the ledger.
        call = stored_call(context.session, response.id)
        if call is None:
            raise NoSuchCall(response.id)
        if call.name != APPROVAL_TOOL:
            raise NotAnApproval(call.name)
        ledger = run.ledger
        # Read under the conversation's lock by this run or the delivery running it; else, a
        # ticket that is no longer open (already delivered or settled), read now.
        ticket = run.known.get(call.id or "") or await ledger.tickets.find_by_call(run.conversation, call.id or "")
        if ticket is None:
            raise NoTicketForCall()
        ticket = await self._bring_up_to_date(run, ticket, response, context)
        if asks(response):
            if ticket.status is not TicketStatus.PENDING and not (ticket.delivered_at or ticket.settled_at):
                # Decided, not delivered yet: the app delivers the ledger's record first, then answers.
                await self.courier.owed(context, run.conversation, run.known, [ticket])
                ticket = await ledger.tickets.get(ticket.id)
            return await news(ledger, ticket)
        if ticket.status is TicketStatus.PENDING:
            await ledger.tickets.record_refusal(
                ticket.id, actor=context.session.user_id,
                detail=f"response claiming {claimed_status(response)!r} while pending")
            raise StillPending(ticket.id)
        if ticket.delivered_at or ticket.settled_at:
            raise await already_delivered(ledger, ticket)
        if (why := disagreement(response, call, ticket, ledger.policy)) is not None:
            await ledger.tickets.record_refusal(ticket.id, actor=context.session.user_id, detail=f"response: {why}")
            raise AnswerDisagrees(ticket.id, why)
        run.delivering.append(ticket.id)
        return None

    async def _bring_up_to_date(
        self, run: ApprovalRun, ticket: Ticket, response: types.FunctionResponse, context: InvocationContext,
    ) -> Ticket:
        """A pending ticket brought up to date: expired, or (DEV_CHAT_APPROVAL only) decided from the chat."""
        ledger = run.ledger
        if ticket.status is not TicketStatus.PENDING:
            return ticket
        if ticket.expires_at <= ledger.now():
            try:
                expired = await ledger.tickets.expire(ticket.id)
            except LedgerError:
                return await ledger.tickets.get(ticket.id)
            ledger.watch.tell("ledger.expire", outcome="expired", channel="sweep", count=1)  # for the metrics
            return expired
        claimed = claimed_status(response)
        if run.settings.dev_chat_approval and claimed in (TicketStatus.APPROVED, TicketStatus.REJECTED):
            # DEV_CHAT_APPROVAL: the chat answer box acts as an approver, and
            # the ledger records it as such. Never enable this in production.
            try:
                decided = await ledger.tickets.decide(
                    ticket.id, approver=context.session.user_id, approve=claimed == TicketStatus.APPROVED,
                    reason="decided in the chat with DEV_CHAT_APPROVAL on", from_chat=True,
                    via=Via("chat", {"session_user": context.session.user_id}))
            except (LedgerError, InputError):
                return await ledger.tickets.get(ticket.id)
            if decided.status is not TicketStatus.PENDING:
                ledger.watch.tell("ledger.decide", outcome=decided.status.value, channel="chat", count=1)
            return decided
        return ticket

    async def before_agent_callback(self, *, agent: Any, callback_context: CallbackContext) -> types.Content | None:
        run = found_run(callback_context)
        if run is None or run.note is None or run.invocation_id != callback_context.invocation_id:
            return None
        # The agent answers with the note instead of running: authored by the
        # agent, so the dev UI shows it as the agent's reply.
        return types.Content(role="model", parts=[types.Part(text=run.note)])

    async def on_event_callback(self, *, invocation_context: InvocationContext, event: Event) -> Event | None:
        run = found_run(invocation_context)
        if run is None or run.note is None or event.author == "user":
            return None
        parts = event.content.parts if event.content and event.content.parts else []
        if any(part.text == run.note for part in parts):
            return event.model_copy(update={"custom_metadata": {**(event.custom_metadata or {}), NOTE_MARK: True}})
        return None

    async def after_tool_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any, result: dict[str, Any]
    ) -> dict[str, Any] | None:
        """`reimburse` paid a ticket in this run: the run no longer counts it as unpaid."""
        run = found_run(tool_context)
        if (run is not None and tool.name == REIMBURSE_TOOL and isinstance(result, dict)
                and result.get("status") in PAID):
            run.unpaid.discard(result.get("ticket_id"))
        return None

    async def on_tool_error_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any, error: Exception
    ) -> dict[str, Any] | None:
        """A tool's refusal is its answer, in the chat's words (notes.py); a ledger it cannot reach, so said.

        The tools raise what the ledger refuses, as a `Refusal`; the model reads this answer and tells the user.
        Never SQL, never a 500.
        """
        if isinstance(error, Refusal):  # first: a database gone or at another schema says itself what to do
            return tool_error(error)
        if not isinstance(error, UNUSABLE):
            return None
        logger.warning("%s could not use the ledger: %s", tool.name, without_sql(str(error)))
        return {"status": ERROR, "error": unusable_note(error)}

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        run = finish_run(invocation_context)
        if run is None:
            return
        # Recorded in the transaction that frees the conversation: this run's own lock, or
        # the lock of the delivery that runs it (courier.py).
        lock = run.lock or (run.held.lock if run.held is not None else None)
        try:
            if lock is not None:
                lock.deliveries.extend(run.delivering)
            else:
                await self.courier.arrived(run.delivering, actor=GUARD)
        finally:
            await self._release(run)

    async def on_run_error_callback(self, *, invocation_context: InvocationContext, error: Exception) -> None:
        run = finish_run(invocation_context)
        if run is None:
            return
        try:
            for ticket_id in run.delivering:
                await self.courier.failed(ticket_id, GUARD, f"the run failed: {type(error).__name__}: {error}")
        finally:
            await self._release(run)

    async def _release(self, run: ApprovalRun) -> None:
        if run.lock is not None:
            try:
                await run.lock.release()
            except UNUSABLE as error:  # the lease lapses by itself (ledger/storage/locks.py)
                logger.warning("Could not release the lock on %s: %s", run.conversation, without_sql(str(error)))
                if run.lock.deliveries:
                    raise
