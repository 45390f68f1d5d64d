"""The A2A requests of another agent, answered by the expense agent and the ledger (a2a-sdk's `RequestHandler`).

A message runs one turn of the agent, as the client's requester name, in the conversation of its context (ADK's
Runner, with the approval guard, as in chat). Its task then follows the ticket the turn opened: a task's state is
read from the ledger on every request (outcome.py), so approvers deciding anywhere end it, and nothing the client
sends can. The approval itself comes only from approvers, never from the task's owner: see docs/a2a.md.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator
from dataclasses import replace
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
)
from a2a.utils.proto_utils import to_stream_response
from google.adk.a2a.converters.part_converter import convert_a2a_part_to_genai_part
from google.adk.events import Event
from google.adk.sessions import BaseSessionService
from google.genai import types
from google.protobuf.json_format import MessageToDict

from ..delivery.courier import Courier
from ..desk import Desk
from ..ledger import LedgerError, TicketStatus, inputs
from ..names import AGENT_NAME, PayoutStatus
from ..outbound import LOOPBACK, refused_url
from .outcome import TERMINAL, task_of
from .records import PushConfig, TaskRecord, TaskRecords

logger = logging.getLogger(__name__)

# How often a subscription reads its task again, and how long a retried send waits for the first to finish.
POLL_SECONDS = 1.0
RETRY_WAIT_SECONDS = 60.0


def client_of(context: ServerCallContext) -> str:
    """The requester the credentials name (endpoint.py authenticated them before any request reaches here)."""
    if not context.user.is_authenticated:
        raise PermissionError("unauthenticated A2A request")
    return context.user.user_name


def _id(value: str, what: str) -> str:
    if not value or len(value) > inputs.MAX_ID:
        raise InvalidParamsError(f"{what} must be 1 to {inputs.MAX_ID} characters.")
    return value


def _readable(message: Message) -> list[types.Part]:
    """The message's parts as the agent reads them (ADK's converter); a message with none is refused."""
    parts = [converted for part in message.parts if (converted := convert_a2a_part_to_genai_part(part))]
    if not parts:
        raise InvalidParamsError("The message has no part the agent reads: send text.")
    return parts


def what_the_turn_did(events: list[Event]) -> tuple[str | None, list[str], str | None]:
    """The ticket a turn opened (the first, for a message of several), its payouts, and the agent's last words."""
    tickets: list[str] = []
    payouts: list[str] = []
    reply = None
    for event in events:
        for response in event.get_function_responses():
            said = response.response or {}
            if response.name == "ask_for_approval" and said.get("status") == TicketStatus.PENDING.value:
                tickets.append(str(said.get("ticket_id")))
            if response.name == "reimburse" and said.get("status") in (PayoutStatus.PAID, PayoutStatus.ALREADY_PAID):
                payouts.append(str(said.get("payout_id")))
        if event.author == AGENT_NAME and event.content and not event.partial:
            text = "".join(part.text or "" for part in event.content.parts or [] if not part.thought)
            reply = text.strip() or reply
    return (tickets[0] if tickets else None), payouts, reply


class ExpenseTasks(RequestHandler):
    def __init__(self, desk: Desk, courier: Courier, sessions: BaseSessionService, push_hosts: tuple[str, ...]) -> None:
        self.desk = desk
        self.courier = courier
        self.sessions = sessions
        self.push_hosts = LOOPBACK + push_hosts

    @property
    def records(self) -> TaskRecords:
        return TaskRecords(self.desk.ledger)  # the ledger of the loop serving (desk.py)

    async def task(self, record: TaskRecord) -> Task:
        """The task as the ledger has it now."""
        ledger = self.desk.ledger
        ticket = await ledger.tickets.get(record.ticket_id) if record.ticket_id else None
        paid = (await ledger.payouts.find(ticket_id=ticket.id) if ticket is not None
                else [p for p in await ledger.payouts.find(session_id=record.session_id)
                      if p.id in (record.payout_ids or "").split(",")])
        return task_of(record, ticket, paid, ledger.now())

    async def _record(self, task_id: str, context: ServerCallContext) -> TaskRecord:
        record = await self.records.get(task_id, client_of(context))
        if record is None:
            raise TaskNotFoundError(f"No task {task_id[:inputs.MAX_ID]!r} of yours.")
        return record

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task:
        client, message = client_of(context), params.message
        _id(message.message_id, "messageId")
        parts = _readable(message)  # before a task exists: a message the agent cannot read opens none
        if message.task_id:  # a later message: it runs in the conversation, and the task still follows its ticket
            record = await self._record(message.task_id, context)
            if (await self.task(record)).status.state in TERMINAL:
                raise InvalidParamsError(f"Task {record.id} has ended; send a new message without taskId "
                                         f"(contextId {record.context_id} keeps the conversation).")
            _ticket, _payouts, reply = what_the_turn_did(await self._turn(client, record, parts))
            task = await self.task(record)
            if reply:
                task.history.append(Message(message_id=str(uuid.uuid4()), role=Role.ROLE_AGENT, task_id=record.id,
                                            context_id=record.context_id, parts=[Part(text=reply)]))
            return task
        push = None
        if params.configuration.HasField("task_push_notification_config"):  # checked before anything is asked
            push = self._push(params.configuration.task_push_notification_config, task_id="")
        record, new = await self.records.open(client, message.message_id,
                                              _id(message.context_id or str(uuid.uuid4()), "contextId"))
        if push is not None:
            await self.records.add_push(replace(push, task_id=record.id))
        if new:
            await self._run(record, parts)
        else:
            await self._wait_for(record, client)
        return await self.task(await self._record(record.id, context))

    async def _run(self, record: TaskRecord, parts: list[types.Part]) -> None:
        try:
            ticket_id, payouts, reply = what_the_turn_did(await self._turn(record.client, record, parts))
            await self.records.finish(record.id, ticket_id=ticket_id, payout_ids=payouts, reply=reply)
        except Exception as error:  # the model, the store or the conversation's lock: the task says so
            logger.warning("A2A task %s failed: %s: %s", record.id, type(error).__name__, error)
            await self.records.finish(record.id, ticket_id=None, payout_ids=[], reply=None,
                                      error=f"The agent could not answer ({type(error).__name__}); send it again.")

    async def _turn(self, client: str, record: TaskRecord, parts: list[types.Part]) -> list[Event]:
        """One turn of the agent on a message's `parts`, as `client`, in the conversation of the task's context."""
        app = self.desk.app
        if await self.sessions.get_session(app_name=app.name, user_id=client, session_id=record.session_id) is None:
            await self.sessions.create_session(app_name=app.name, user_id=client, session_id=record.session_id)
        runner = self.desk.runner(self.sessions)
        return [event async for event in runner.run_async(
            user_id=client, session_id=record.session_id, new_message=types.Content(role="user", parts=parts))]

    async def _wait_for(self, record: TaskRecord, client: str) -> None:
        """A retried send: its first is running (or ran); wait a while for its turn to finish."""
        waited = 0.0
        while record.finished_at is None and record.error is None and waited < RETRY_WAIT_SECONDS:
            await asyncio.sleep(POLL_SECONDS)
            waited += POLL_SECONDS
            record = await self.records.get(record.id, client) or record

    async def on_message_send_stream(self, params: SendMessageRequest,
                                     context: ServerCallContext) -> AsyncGenerator[Task]:
        """The task once its turn is done; a task that waits for approvers is followed with SubscribeToTask."""
        yield await self.on_message_send(params, context)

    async def on_subscribe_to_task(self, params: SubscribeToTaskRequest,
                                   context: ServerCallContext) -> AsyncGenerator[Task]:
        """The task now, then each time it changes, until it ends: approvers may take days, the stream stays open."""
        record = await self._record(params.id, context)
        last = None
        while True:
            task = await self.task(record)
            shown = (task.status.state, task.status.message.parts[0].text if task.status.message.parts else "")
            if shown != last:
                yield task
                last = shown
            if task.status.state in TERMINAL:
                return
            await asyncio.sleep(POLL_SECONDS)
            record = await self._record(params.id, context)

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        return await self.task(await self._record(params.id, context))

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        size = min(params.page_size or 50, 100)
        offset = int(params.page_token) if params.page_token.isdigit() else 0
        records, total = await self.records.of_client(client_of(context), params.context_id or None, size, offset)
        return ListTasksResponse(tasks=[await self.task(record) for record in records], page_size=size,
                                 total_size=total, next_page_token=str(offset + size) if offset + size < total else "")

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        """Withdraw the task's pending ticket: the task ends `canceled` once the ledger says withdrawn."""
        record = await self._record(params.id, context)
        if record.ticket_id is None or (await self.task(record)).status.state in TERMINAL:
            raise TaskNotCancelableError(f"Task {record.id} has no pending ticket to withdraw.")
        try:
            await self.courier.withdraw(record.ticket_id, requester=record.client, channel="a2a")
        except LedgerError as refused:  # decided meanwhile, or expired
            raise TaskNotCancelableError(f"Ticket {record.ticket_id} cannot be withdrawn: {refused}") from None
        return await self.task(record)

    async def on_create_task_push_notification_config(self, params: TaskPushNotificationConfig,
                                                      context: ServerCallContext) -> TaskPushNotificationConfig:
        record = await self._record(params.task_id, context)
        push = self._push(params, task_id=record.id)
        await self.records.add_push(push)
        return _shown(push)

    def _push(self, params: TaskPushNotificationConfig, task_id: str) -> PushConfig:
        """A push configuration this server will follow, or InvalidParams saying why not."""
        if refused := refused_url(params.url, self.push_hosts, "A2A_PUSH_HOSTS"):
            raise InvalidParamsError(f"The push URL is refused: {refused}. Loopback is allowed; the server's "
                                     "operator allows other hosts with A2A_PUSH_HOSTS.")
        if params.HasField("authentication"):
            raise InvalidParamsError("Push authentication is not supported; give a token, sent back in "
                                     "X-A2A-Notification-Token.")
        return PushConfig(task_id, _id(params.id or "default", "id"), params.url, params.token or None)

    async def on_get_task_push_notification_config(self, params: GetTaskPushNotificationConfigRequest,
                                                   context: ServerCallContext) -> TaskPushNotificationConfig:
        record = await self._record(params.task_id, context)
        for push in await self.records.pushes(record.id):
            if push.id == (params.id or "default"):
                return _shown(push)
        raise TaskNotFoundError(f"Task {record.id} has no push configuration {params.id!r}.")

    async def on_list_task_push_notification_configs(
            self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext,
    ) -> ListTaskPushNotificationConfigsResponse:
        record = await self._record(params.task_id, context)
        return ListTaskPushNotificationConfigsResponse(
            configs=[_shown(push) for push in await self.records.pushes(record.id)])

    async def on_delete_task_push_notification_config(self, params: DeleteTaskPushNotificationConfigRequest,
                                                      context: ServerCallContext) -> None:
        record = await self._record(params.task_id, context)
        await self.records.drop_push(record.id, params.id)

    async def on_get_extended_agent_card(self, params: GetExtendedAgentCardRequest,
                                         context: ServerCallContext) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError("This agent has no extended card.")

    async def queue_pushes(self) -> int:
        """Put the outcome of each ended task with a push configuration in the outbox, once; returns how many."""
        queued = 0
        for push, record in await self.records.unqueued():
            task = await self.task(record)
            if task.status.state in TERMINAL and await self.records.queue(push, _json(task)):
                queued += 1
        return queued



def _shown(push: PushConfig) -> TaskPushNotificationConfig:
    """A push configuration as the client sees it."""
    return TaskPushNotificationConfig(task_id=push.task_id, id=push.id, url=push.url, token=push.token or "")


def _json(task: Task) -> dict[str, Any]:
    """What a push carries: the task as a stream response, as a2a-sdk's own sender posts it."""
    return dict(MessageToDict(to_stream_response(task)))
