"""Runs that deliver into a conversation: the app whose guard holds it, and what a conversation is owed.

A delivery run must not take the lock its deliverer holds, so it runs in a copy of the app whose guard is handed
the hold in its constructor (`holding_app`), never through a global.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC

from google.adk.agents.invocation_context import InvocationContext
from google.adk.apps import App
from google.adk.runners import Runner
from google.adk.sessions import DatabaseSessionService, InMemorySessionService
from sqlalchemy.ext.asyncio import AsyncConnection

from ..adk_compat import STORED_SESSION_VERSION, in_memory_version
from ..ledger import Ledger, Ticket, TicketStatus
from .decisions import call_gone, decision_message, holds_call
from .run import ApprovalRun, Holding, HoldsConversations

logger = logging.getLogger(__name__)


def holding_app(app: App, holding: Holding) -> App:
    """`app` with its approval guard running inside `holding`."""
    plugins = [plugin.holding_for(holding) if isinstance(plugin, HoldsConversations) else plugin
               for plugin in app.plugins]
    return App(name=app.name, root_agent=app.root_agent, plugins=plugins)


def running_app(context: InvocationContext) -> App:
    """The app this run is: the same agent, model and plugins, to deliver with from inside it."""
    return App(name=context.session.app_name, root_agent=context.agent,
               plugins=list(context.plugin_manager.plugins))


SessionVersionRead = Callable[[AsyncConnection], Awaitable[float | None]]


def session_version(context: InvocationContext, ledger: Ledger) -> SessionVersionRead | None:
    """A read of the stored session's version, for the transaction that takes the lock; None: always reload.

    It is what ADK's stale-session check compares: `update_time` in the ledger's database, `last_update_time` in memory.
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


async def refresh(context: InvocationContext) -> None:
    """Load the conversation again: ADK loaded it before the lock, and appending to a stale copy fails."""
    fresh = await context.session_service.get_session(
        app_name=context.session.app_name, user_id=context.session.user_id, session_id=context.session.id
    )
    if fresh is not None:
        context.session = fresh


async def deliver_owed(context: InvocationContext, run: ApprovalRun, open_tickets: Iterable[Ticket]) -> None:
    """Deliver what this conversation is owed before answering its new message (`open_tickets`: read under its lock)."""
    ledger = run.ledger
    now = ledger.now()
    due = [t for t in open_tickets if t.status is TicketStatus.PENDING and t.expires_at <= now]
    if due:
        if expired := await ledger.tickets.expire_due(conversation=run.conversation):
            ledger.watch.tell("ledger.expire", outcome="expired", channel="sweep", count=len(expired))
        owed = await ledger.deliveries.undelivered(run.conversation)
    else:
        owed = sorted((t for t in open_tickets if t.decided_at is not None), key=lambda t: (t.decided_at, t.id))
    if not owed:
        return
    app = holding_app(running_app(context), Holding(run.conversation, tickets=run.known))
    runner = Runner(app=app, session_service=context.session_service)
    for ticket in owed:
        if not holds_call(context.session, ticket.call_id):
            # Deleted and started again under the same id: ADK would refuse the decision
            # and this message with it. Recorded once, so an approver can settle the ticket.
            why = call_gone(ticket)
            if ticket.delivery_error != why:
                await ledger.deliveries.mark_undelivered(ticket.id, actor="approval_guard", error=why)
            continue
        try:
            async for _event in runner.run_async(user_id=run.conversation.user_id,
                                                 session_id=run.conversation.session_id,
                                                 new_message=decision_message(ticket)):
                pass
        except Exception as error:  # recorded; the person's own message is still answered
            logger.warning("Delivering %s before a message failed: %s: %s", ticket.id, type(error).__name__, error)
            # A failure inside the run is recorded by that run's guard; one before it, here.
            if (await ledger.tickets.get(ticket.id)).delivery_error == ticket.delivery_error:
                await ledger.deliveries.mark_undelivered(ticket.id, actor="approval_guard",
                                                         error=f"{type(error).__name__}: {error}")
    await refresh(context)
