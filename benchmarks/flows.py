"""One approval flow - request, approval, payout - on this project or on the baseline.

A `System` is one agent on one store. Both systems run the same steps:
`request` (the employee asks; the agent opens a pending call), `approve` (the
approver's decision is delivered as the FunctionResponse for that call, and
the agent pays), and `duplicate` (the same approval delivered a second time).

The third system, `confirmation`, is ADK's own tool confirmation
(confirmation.py): its pending call is ADK's `adk_request_confirmation`, and
its client approves with `{"confirmed": true}` instead of a ticket's status.

This project's system is the app as shipped: `build_app(desk)` (the `App`
with its ApprovalGuard plugin, sessions in `DatabaseSessionService`) and the
ledger at the same URL, on one engine as in the server. On the in-memory
store it runs with ADK's InMemorySessionService and the ledger on an
in-memory SQLite database (`sqlite+aiosqlite://`), so nothing touches the
disk.

Each of this project's systems has a desk of its own
(long_running_agent/desk.py): the benchmark's pinned settings with the
system's database, and its metered app. Its guard, tools and courier work on
that desk, so several systems can be open at once and take turns.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.adk.apps import App
from google.adk.events import Event
from google.adk.models import BaseLlm
from google.adk.runners import Runner
from google.adk.sessions import DatabaseSessionService, InMemorySessionService
from google.genai import types

from long_running_agent.agent import build_app
from long_running_agent.delivery.courier import Courier
from long_running_agent.delivery.decisions import decision_message
from long_running_agent.desk import Desk
from long_running_agent.ledger import Ledger
from long_running_agent.settings import Settings

from .baseline import SESSION_SERVICES, Bank, seed_runner, stock_session_service
from .confirmation import CONFIRMATION_CALL, CONFIRMED, confirmation_runner
from .environment import OFFLINE_MODEL, pinned
from .metering import ModelMeter, metered

MEMORY_LEDGER_URL = "sqlite+aiosqlite://"
REQUEST = "Please reimburse $250.00 for the team offsite lunch."
# Two expenses above the limit in one message: two pending calls from one model turn.
SEVERAL = "Please reimburse $250.00 for the team offsite lunch and $480.00 for the conference ticket."
APPROVER = "bob"
OURS, SEED, CONFIRMATION = "ours", "seed", "confirmation"
SYSTEMS = (OURS, SEED, CONFIRMATION)


@dataclass
class Pending:
    user_id: str
    session_id: str
    call: types.FunctionCall
    response: dict[str, Any]

    @property
    def ticket_id(self) -> str:
        return str(self.response.get("ticket_id", ""))


@dataclass
class FlowTimes:
    request_s: float
    approve_s: float

    @property
    def total_s(self) -> float:
        return self.request_s + self.approve_s


@dataclass
class System:
    """An agent on a store, with a model meter; see the module docstring."""

    name: str
    store: str
    service: str  # the session service's class name
    runner: Runner
    meter: ModelMeter
    bank: Bank | None = None
    desk: Desk | None = None  # this project's: its settings, ledger and app

    @property
    def ledger(self) -> Ledger | None:
        return self.desk.ledger if self.desk is not None else None

    async def request(self, user_id: str, text: str = REQUEST) -> Pending:
        session = await self.runner.session_service.create_session(
            app_name=self.runner.app_name, user_id=user_id
        )
        events = await self._run(user_id, session.id, types.Content(role="user", parts=[types.Part(text=text)]))
        for event in events:
            for call in event.get_function_calls():
                if call.id in (event.long_running_tool_ids or set()):
                    return Pending(user_id, session.id, call, _response(events, call.id))
        raise RuntimeError(f"no pending call for {text!r}")

    async def request_several(self, user_id: str, text: str = SEVERAL) -> list[Pending]:
        """Ask for several expenses in one message; one pending call each."""
        session = await self.runner.session_service.create_session(
            app_name=self.runner.app_name, user_id=user_id
        )
        events = await self._run(user_id, session.id, types.Content(role="user", parts=[types.Part(text=text)]))
        return [Pending(user_id, session.id, call, _response(events, call.id))
                for event in events for call in event.get_function_calls()
                if call.id in (event.long_running_tool_ids or set())]

    async def approve(self, pending: Pending) -> list[Event]:
        if self.desk is not None:
            delivery = await Courier(self.desk).decide(pending.ticket_id, approver=APPROVER, approve=True)
            return delivery.events
        return await self._run(pending.user_id, pending.session_id, self._client_approval(pending))

    async def duplicate(self, pending: Pending) -> list[Event]:
        """Deliver the same approval again, exactly as the application sent it."""
        if self.ledger is not None:
            ticket = await self.ledger.tickets.get(pending.ticket_id)
            return await self._run(pending.user_id, pending.session_id, decision_message(ticket))
        return await self._run(pending.user_id, pending.session_id, self._client_approval(pending))

    async def payouts(self, pending: Pending) -> int:
        if self.ledger is not None:
            return len(await self.ledger.payouts.find(session_id=pending.session_id))
        assert self.bank is not None
        return self.bank.payouts[pending.session_id]

    async def flow(self, n: int) -> tuple[Pending, FlowTimes]:
        started = time.perf_counter()
        pending = await self.request(f"employee-{n}")
        requested = time.perf_counter()
        await self.approve(pending)
        return pending, FlowTimes(requested - started, time.perf_counter() - requested)

    async def close(self) -> None:
        service = self.runner.session_service
        if self.desk is not None:
            await self.desk.close()  # the ledger's engine, which the app's session store shares
        elif isinstance(service, DatabaseSessionService):
            await service.db_engine.dispose()  # ADK's stock service

    def _client_approval(self, pending: Pending) -> types.Content:
        """The approval as the client sends it: the seed's approved ticket, or ADK's confirmation."""
        if pending.call.name == CONFIRMATION_CALL:
            answer = dict(CONFIRMED)
        else:
            answer = {**pending.response, "status": "approved"}
        response = types.FunctionResponse(id=pending.call.id, name=pending.call.name, response=answer)
        return types.Content(role="user", parts=[types.Part(function_response=response)])

    async def _run(self, user_id: str, session_id: str, message: types.Content) -> list[Event]:
        return [
            event
            async for event in self.runner.run_async(user_id=user_id, session_id=session_id, new_message=message)
        ]


def _response(events: list[Event], call_id: str | None) -> dict[str, Any]:
    for event in events:
        for response in event.get_function_responses():
            if response.id == call_id:
                return dict(response.response or {})
    return {}


def metered_app(meter: ModelMeter) -> Callable[..., App]:
    """What builds a desk's app: the app as shipped, with `meter` among its plugins.

    Always on the offline model, whatever the desk's settings choose: the meter refuses any other.
    """

    def build(desk: Desk, *, model: str | BaseLlm | None = None) -> App:
        return build_app(desk, model=OFFLINE_MODEL, plugins=[meter])

    return build


def open_ours(store: str, url: str | None, settings: Settings) -> System:
    """This project on `store`; `url` is the SQLite file or PostgreSQL database (None for memory)."""
    meter = ModelMeter()
    desk = Desk(settings.model_copy(update={"database_url": url or MEMORY_LEDGER_URL}), app=metered_app(meter))
    if store == "memory":
        runner = Runner(app=desk.app, session_service=InMemorySessionService())
    else:
        assert url is not None
        runner = desk.runner()  # the app's own session store, on the ledger's engine, as in the server
    return System(OURS, store, SESSION_SERVICES[store], runner, meter, desk=desk)


def open_seed(store: str, url: str | None, settings: Settings, service: str) -> System:
    """The baseline on ADK's stock session service `service`."""
    bank = Bank()
    runner = seed_runner(bank, stock_session_service(store, url, service), settings)
    return System(SEED, store, service, runner, metered(runner), bank=bank)


def open_confirmation(store: str, url: str | None, settings: Settings, service: str) -> System:
    """ADK's tool confirmation on ADK's stock session service `service`."""
    bank = Bank()
    runner = confirmation_runner(bank, stock_session_service(store, url, service), settings)
    return System(CONFIRMATION, store, service, runner, metered(runner), bank=bank)


def open_system(name: str, store: str, url: str | None, settings: Settings | None = None,
                service: str | None = None) -> System:
    """System `name` on `store`, under `settings` (default: the benchmark's pinned ones).

    `service`: the seed's or the confirmation's session service, by default the one this project uses on `store`.
    """
    if name == OURS:
        return open_ours(store, url, settings or pinned())
    opened = {SEED: open_seed, CONFIRMATION: open_confirmation}[name]
    return opened(store, url, settings or pinned(), service or SESSION_SERVICES[store])
