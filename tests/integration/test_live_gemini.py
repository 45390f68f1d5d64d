"""The approval flow against the real Gemini API; skipped without a key.

The same flow as tests/test_gemini_wire.py, but Gemini decides: the test
asserts the protocol (a long-running approval call, the decision delivered
under the same call, exactly one payout in the ledger), never the wording.

Run with:
    GOOGLE_API_KEY=... .venv/bin/python -m pytest tests/integration -q
    LIVE_GEMINI_MODEL=gemini-2.5-flash GOOGLE_API_KEY=... .venv/bin/python -m pytest tests/integration -q

The key: tests/support/live.py.
"""

from __future__ import annotations

import pytest
from google.adk.models.google_llm import Gemini
from google.genai import types
from support.conversation import Conversation, calls, pending_calls, responses
from support.live import LIVE_KEY, LIVE_MODEL, NEEDS_KEY
from support.models import runner_with

pytestmark = pytest.mark.skipif(not LIVE_KEY, reason=NEEDS_KEY)


@pytest.fixture
def live_gemini(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point google-genai at the real Gemini API (it reads the key itself); returns the database URL."""
    for name in ("GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI",
                 "GOOGLE_GENAI_USE_ENTERPRISE", "DEV_CHAT_APPROVAL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", LIVE_KEY or "")
    return sqlite_url


async def test_live_gemini_waits_for_approval_then_pays_once(desk, live_gemini: str) -> None:
    # A new Gemini instance builds its client from the key set above. Retries
    # ride out a 429 or 503; a 400 (a malformed request) still fails at once.
    model = Gemini(model=LIVE_MODEL, retry_options=types.HttpRetryOptions(attempts=4, initial_delay=2))
    runner = runner_with(desk, model, live_gemini)
    ledger = desk.ledger_at(live_gemini)
    try:
        chat = await Conversation(runner, "alice").start()
        events = await chat.say("Please reimburse $250 for the team lunch")

        [call] = pending_calls(events)
        assert call.name == "ask_for_approval"
        assert float((call.args or {})["amount"]) == 250.0
        [pending] = responses(events, "ask_for_approval")
        assert pending["status"] == "pending"
        assert calls(events, "reimburse") == []
        assert await ledger.payouts.find(session_id=chat.session_id) == []

        decision = await ledger.tickets.decide(pending["ticket_id"], approver="bob", approve=True)
        resumed = await chat.answer(call, decision.as_response())

        assert [c.name for c in calls(resumed, "ask_for_approval")] == []
        assert calls(resumed, "reimburse"), "Gemini did not call reimburse after the approval"
        [payout] = await ledger.payouts.find(ticket_id=pending["ticket_id"])
        assert payout.amount_cents == 25_000
        assert await ledger.payouts.find(session_id=chat.session_id) == [payout]
    finally:
        await runner.close()
