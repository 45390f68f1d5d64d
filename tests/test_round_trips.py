"""What one approved flow (request, approval, payout) asks of the database, on SQLite and PostgreSQL.

The app as the server runs it: the ledger and ADK's session store on one
engine, the approval decided and delivered by the courier. Its guarantees
cost at most 6 ledger round trips per flow (support/round_trips.py says what
one is), and no more session-store calls than the seed's bare pattern makes
for the same flow on ADK's stock store.
"""

from __future__ import annotations

import asyncpg
import pytest
from google.adk.sessions import DatabaseSessionService
from google.genai import types
from support.conversation import pending_calls, responses
from support.desks import TestDesk
from support.round_trips import ledger_visits, session_store_calls

from benchmarks.baseline import Bank, seed_runner
from long_running_agent.delivery.courier import Courier, Outcome
from long_running_agent.ledger.storage import engine

MAX_LEDGER_ROUND_TRIPS = 6
REQUEST = "Please reimburse $250 for the team lunch"


def _message(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


async def _our_flow(desk: TestDesk, user_id: str) -> str:
    """Request and approve $250 in a new conversation of the shipped app; returns the paid ticket's id."""
    runner = desk.runner()
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id=user_id)
    events = [e async for e in runner.run_async(user_id=user_id, session_id=session.id,
                                                new_message=_message(REQUEST))]
    [pending] = responses(events, "ask_for_approval")
    delivery = await Courier(desk).decide(pending["ticket_id"], approver="bob", approve=True)
    assert delivery.outcome is Outcome.DELIVERED
    [paid] = responses(delivery.events, "reimburse")
    assert paid["status"] == "paid" and paid["ticket_id"] == pending["ticket_id"]
    return str(pending["ticket_id"])


async def _seed_flow(runner, user_id: str) -> None:
    """The same flow in the seed's pattern: the approval is the client's FunctionResponse."""
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id=user_id)
    events = [e async for e in runner.run_async(user_id=user_id, session_id=session.id,
                                                new_message=_message(REQUEST))]
    [call] = pending_calls(events)
    [pending] = responses(events, "ask_for_approval")
    answer = types.FunctionResponse(id=call.id, name=call.name, response={**pending, "status": "approved"})
    resumed = [e async for e in runner.run_async(
        user_id=user_id, session_id=session.id,
        new_message=types.Content(role="user", parts=[types.Part(function_response=answer)]))]
    assert responses(resumed, "reimburse")


async def test_an_approved_flow_makes_at_most_six_ledger_round_trips(db_url, desk):
    ledger = desk.ledger
    await _our_flow(desk, "warm-up")  # the schema is made on first use

    with ledger_visits(ledger.engine) as visits:
        ticket_id = await _our_flow(desk, "alice")

    assert len(visits.ledger) <= MAX_LEDGER_ROUND_TRIPS, visits.ledger
    # Every guarantee was still written: decided, paid once, delivered once, each in the trail.
    actions = [entry.action for entry in await ledger.tickets.audit(ticket_id)]
    assert actions == ["requested", "approved", "evidence", "paid", "delivered"]
    assert len(await ledger.payouts.find(ticket_id=ticket_id)) == 1


async def test_an_approved_flow_calls_the_session_store_no_more_than_the_seed_pattern(db_url, desk):
    await _our_flow(desk, "warm-up")
    seed = seed_runner(Bank(), DatabaseSessionService(db_url=db_url), desk.settings)
    try:
        await _seed_flow(seed, "warm-up")
        with session_store_calls(seed.session_service) as seed_calls:
            await _seed_flow(seed, "alice")
    finally:
        await seed.session_service.db_engine.dispose()

    with session_store_calls(desk.sessions) as our_calls:
        await _our_flow(desk, "alice")

    assert len(our_calls) <= len(seed_calls), (our_calls, seed_calls)
    assert our_calls.count("get_session") <= seed_calls.count("get_session")


@pytest.mark.postgres
async def test_an_approved_flow_pings_no_connection_used_a_moment_ago(postgres_url, configure, desk, monkeypatch):
    configure(database_url=postgres_url)
    ledger = desk.ledger
    await _our_flow(desk, "warm-up")
    pinged = []
    ping = ledger.engine.dialect.do_ping
    monkeypatch.setattr(ledger.engine.dialect, "do_ping", lambda connection: pinged.append(1) or ping(connection))

    await _our_flow(desk, "alice")

    # Each connection came back to the pool milliseconds before its next use.
    assert len(pinged) <= 1, len(pinged)


@pytest.mark.postgres
async def test_a_pooled_connection_the_server_dropped_is_replaced_before_use(postgres_url, configure, desk,
                                                                             monkeypatch):
    configure(database_url=postgres_url)
    ledger = desk.ledger
    await _our_flow(desk, "warm-up")
    # Every pooled connection is now idle "long enough"; the server drops them all (a restart would).
    monkeypatch.setattr(engine, "PING_AFTER_IDLE_S", 0.0)
    admin = await asyncpg.connect(postgres_url.replace("postgresql+asyncpg", "postgresql"))
    try:
        dropped = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()")
    finally:
        await admin.close()
    assert dropped >= 1

    ticket_id = await _our_flow(desk, "alice")

    assert len(await ledger.payouts.find(ticket_id=ticket_id)) == 1
