"""The approval guard: checks every approval FunctionResponse against the ledger.

ADK resumes a long-running call for any FunctionResponse whose id matches, and
re-runs the invocation when the same response arrives twice. This plugin,
carried by the `App` to the CLI, `adk web` and `adk api_server` alike, makes
the ledger the authority instead of the message:

- a response whose ticket the ledger has decided (and not yet delivered) goes
  through, with its payload replaced by the ledger's own record;
- anything else - a claim of a decision the ledger does not hold, a second
  delivery, a call without a ticket - is refused: the message is replaced by a
  note (a thought part, which ADK never sends to the model), and the run ends
  before any model or tool call.

ADK offers no single hook for this: `on_user_message_callback` can replace the
message but not stop the run, and `before_run_callback` can stop the run but
by then the message is saved. The verdict travels from one to the other in
the replaced message itself (`invocation_context.user_content`). Each decision
is delivered once: a claim in the ledger when the delivery starts, confirmed
in `after_run_callback`, released in `on_run_error_callback`.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from google.adk.agents.invocation_context import InvocationContext
from google.adk.plugins.base_plugin import BasePlugin
from google.genai import types

from . import ledger as ledger_module
from .ledger import APPROVED, PENDING, REJECTED, LedgerError, Ticket
from .settings import load_settings

APPROVAL_TOOL = "ask_for_approval"
REFUSAL_PREFIX = "Approval response not accepted: "


# How long a started delivery holds its claim before a retry may take over,
# and how long a concurrent duplicate waits for it to finish.
DELIVERY_LEASE = timedelta(seconds=60)
DUPLICATE_WAIT = timedelta(seconds=10)


class Refused(Exception):
    """The response cannot resume the agent; the message says why."""


def _stored_call(context: InvocationContext, call_id: str | None) -> types.FunctionCall | None:
    for event in reversed(context.session.events):
        for call in event.get_function_calls():
            if call.id == call_id:
                return call
    return None


def _claimed_status(response: types.FunctionResponse) -> str | None:
    payload: Any = response.response or {}
    status = payload.get("status") if isinstance(payload, dict) else None
    if status is None and isinstance(payload, dict):
        status = payload.get("result")  # adk web wraps plain text as {"result": ...}
    return str(status).strip().lower() if status is not None else None


class ApprovalGuard(BasePlugin):
    """Lets an approval resume the agent only as the ledger records it, and only once."""

    def __init__(self) -> None:
        super().__init__(name="approval_guard")
        # Deliveries in flight in this process, by run: ADK hands every
        # callback of one run the same InvocationContext object.
        self._deliveries: dict[int, list[str]] = {}

    async def on_user_message_callback(
        self, *, invocation_context: InvocationContext, user_message: types.Content
    ) -> types.Content | None:
        responses = [p.function_response for p in user_message.parts or [] if p.function_response]
        if not responses:
            return None
        try:
            parts = [await self._authoritative(invocation_context, r) for r in responses]
        except Refused as refusal:
            # One refused response refuses the whole message; give back any
            # delivery claimed for the others in it.
            ledger = ledger_module.get_ledger(load_settings().database_url)
            for ticket_id in self._deliveries.pop(id(invocation_context), []):
                await ledger.release_claim(ticket_id)
            # Write the refusal on the latest copy of the session: a concurrent
            # delivery may have added events since this run loaded it, and
            # appending to a stale copy fails with ADK's StaleSessionError.
            fresh = await invocation_context.session_service.get_session(
                app_name=invocation_context.session.app_name,
                user_id=invocation_context.session.user_id,
                session_id=invocation_context.session.id,
            )
            if fresh is not None:
                invocation_context.session = fresh
            # A thought part is kept in the session (and shown by adk web) but
            # never sent to the model, so the pending call stays open for the
            # genuine decision.
            return types.Content(
                role="user", parts=[types.Part(text=REFUSAL_PREFIX + str(refusal), thought=True)]
            )
        return types.Content(role="user", parts=parts)

    async def before_run_callback(
        self, *, invocation_context: InvocationContext
    ) -> types.Content | None:
        message = invocation_context.user_content
        parts = message.parts if message and message.parts else []
        if len(parts) == 1 and parts[0].thought and (parts[0].text or "").startswith(REFUSAL_PREFIX):
            # Also a thought: shown to people, kept out of later model requests
            # (a visible "still pending" would contradict the real decision).
            return types.Content(role="model", parts=[types.Part(text=parts[0].text, thought=True)])
        return None

    async def _authoritative(
        self, context: InvocationContext, response: types.FunctionResponse
    ) -> types.Part:
        # Trust the session, not the message: ADK matches on id only, so the
        # name comes from the stored call and the decision from the ledger.
        call = _stored_call(context, response.id)
        if call is None:
            raise Refused(f"no function call with id {response.id!r} in this conversation.")
        if call.name != APPROVAL_TOOL:
            raise Refused(f"{call.name} is not answered by the application; only approvals are.")
        settings = load_settings()
        ledger = ledger_module.get_ledger(settings.database_url)
        ticket = await ledger.find_by_call(context.session.id, call.id or "")
        if ticket is None:
            raise Refused("this approval call has no ticket (the request was invalid).")
        ticket = await self._settle(ledger, ticket, response, context, settings.dev_chat_approval)
        if ticket.status == PENDING:
            await ledger.record_refusal(
                ticket.id, actor=context.session.user_id,
                detail=f"response claiming {_claimed_status(response)!r} while pending",
            )
            raise Refused(
                f"ticket {ticket.id} is still pending. Only an approver can decide it "
                f"(python main.py approve {ticket.id} --approver NAME, or the inbox page); "
                "the decision then resumes this conversation."
            )
        if not await self._claim_delivery(ledger, ticket.id):
            raise Refused(
                f"ticket {ticket.id} was already {ticket.status} and delivered; "
                "this repeated response was ignored and nothing was paid again."
            )
        self._deliveries.setdefault(id(context), []).append(ticket.id)
        return types.Part(
            function_response=types.FunctionResponse(
                id=call.id, name=call.name, response=ticket.as_response()
            )
        )

    async def _claim_delivery(self, ledger: ledger_module.Ledger, ticket_id: str) -> bool:
        """True if this run may deliver the decision; False for a duplicate.

        A duplicate that arrives while the first delivery is still running
        waits for it to finish before being refused: answering at once would
        write to the session under the running delivery and make that one fail
        with ADK's StaleSessionError.
        """
        deadline = asyncio.get_running_loop().time() + DUPLICATE_WAIT.total_seconds()
        while not await ledger.claim_resume(ticket_id, actor="approval_guard", lease=DELIVERY_LEASE):
            if (await ledger.get(ticket_id)).delivered_at or asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        ledger = ledger_module.get_ledger(load_settings().database_url)
        for ticket_id in self._deliveries.pop(id(invocation_context), []):
            await ledger.confirm_delivery(ticket_id)

    async def on_run_error_callback(
        self, *, invocation_context: InvocationContext, error: Exception
    ) -> None:
        ledger = ledger_module.get_ledger(load_settings().database_url)
        for ticket_id in self._deliveries.pop(id(invocation_context), []):
            await ledger.release_claim(ticket_id)

    async def _settle(
        self,
        ledger: ledger_module.Ledger,
        ticket: Ticket,
        response: types.FunctionResponse,
        context: InvocationContext,
        dev_chat_approval: bool,
    ) -> Ticket:
        """Bring a pending ticket up to date: expire it, or (dev only) decide it from chat."""
        if ticket.status != PENDING:
            return ticket
        if ticket.expires_at <= ledger_module.utc_now():
            try:
                return await ledger.expire(ticket.id)
            except LedgerError:
                return await ledger.get(ticket.id)
        claimed = _claimed_status(response)
        if dev_chat_approval and claimed in (APPROVED, REJECTED):
            # DEV_CHAT_APPROVAL: the chat answer box acts as an approver, and
            # the ledger records it as such. Never enable this in production.
            try:
                return await ledger.decide(
                    ticket.id,
                    approver=f"{context.session.user_id} (chat, DEV_CHAT_APPROVAL)",
                    approve=claimed == APPROVED,
                    reason="decided in the chat with DEV_CHAT_APPROVAL on",
                    allow_self_approval=True,
                )
            except LedgerError:
                return await ledger.get(ticket.id)
        return ticket
