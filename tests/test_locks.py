"""Conversation locks are leases: renewed while their run goes on, freed when it ends or is gone."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from long_running_agent.ledger import Conversation
from long_running_agent.ledger.storage import locks
from long_running_agent.ledger.storage.locks import ConversationBusy

CONVERSATION = Conversation("long_running_agent", "alice", "s-locked")
SHORT_LEASE = timedelta(seconds=0.3)


async def test_a_lock_held_past_its_lease_is_renewed_and_stays_taken(db_url, desk, monkeypatch):
    monkeypatch.setattr(locks, "LEASE", SHORT_LEASE)
    ledger = desk.ledger
    held = await ledger.locks.acquire(CONVERSATION, purpose="a long run")

    await asyncio.sleep(3 * SHORT_LEASE.total_seconds())  # three leases: only renewals keep it

    with pytest.raises(ConversationBusy):
        await ledger.locks.acquire(CONVERSATION, purpose="another run", wait=timedelta(0))
    await held.release()
    after = await ledger.locks.acquire(CONVERSATION, purpose="after it", wait=timedelta(0))
    await after.release()


async def test_a_lock_whose_run_ended_without_releasing_it_is_freed(db_url, desk, monkeypatch):
    monkeypatch.setattr(locks, "LEASE", SHORT_LEASE)  # its first renewal comes after a third of it
    ledger = desk.ledger

    async def hung_up() -> None:  # a run cancelled before it could release its conversation
        await ledger.locks.acquire(CONVERSATION, purpose="a run whose client hung up")

    await asyncio.create_task(hung_up())
    assert await ledger.locks.state(CONVERSATION) is not None

    await asyncio.sleep(SHORT_LEASE.total_seconds())

    assert await ledger.locks.state(CONVERSATION) is None
