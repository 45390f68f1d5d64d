"""One catalogue of refusals: each has one code, one message and one next step, which every surface renders.

The CLI words a next step as a command, the API as a route, the chat as what
people in a chat can do; the code and the message are the same everywhere,
and the API's status codes and error codes are the ones it always answered.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from support import cli

from long_running_agent.cli.render import CLI
from long_running_agent.delivery.notes import CHAT, tool_error
from long_running_agent.ledger import Ticket, TicketStatus
from long_running_agent.names import EXPENSES, Outcome
from long_running_agent.refusals import Refusal
from long_running_agent.refusals.answers import (
    AlreadyDelivered,
    AnswerDisagrees,
    ConversationInUse,
    NotDelivered,
    StillPending,
)
from long_running_agent.refusals.model import ModelUnavailable
from long_running_agent.refusals.rules import (
    AlreadyApprovedByYou,
    AlreadyDecided,
    DatabaseFileGone,
    NeedsNoApproval,
    NotAllowed,
    NotApproved,
    NotRequester,
    NotSettleable,
    TicketExpired,
    TicketNotFound,
    UnusableUserId,
)
from long_running_agent.refusals.startup import SchemaBehind, SettingsError
from long_running_agent.refusals.values import AmountError, InputError
from long_running_agent.web.api_errors import API, refusal_error

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
PENDING = Ticket(
    id="T-0123456789ab", app_name="long_running_agent", user_id="alice", session_id="s-1", call_id="adk-1",
    call_name="ask_for_approval", purpose="team lunch", amount_cents=25_000, status=TicketStatus.PENDING,
    created_at=NOW, expires_at=NOW + timedelta(days=3), decided_by=None, decided_at=None, reason=None,
    approved_cents=None, approvals_needed=1, first_approved_by=None, first_approved_at=None, combined_cents=None,
    reminded_at=None, escalated_to=None, session_store="app", delivered_at=None, delivery_error=None,
    settled_by=None, settled_at=None,
)
APPROVED = replace(PENDING, status=TicketStatus.APPROVED, decided_by="bob", decided_at=NOW)
DELIVERED = replace(APPROVED, delivered_at=NOW)

# What the API answered for each refusal before the catalogue, and answers still: (status, code).
API_ANSWERS = [
    (TicketNotFound("T-0123456789ab"), 404, "ticket_not_found"),
    (AlreadyDecided(DELIVERED), 409, "already_decided"),
    (AlreadyDecided(APPROVED), 409, "already_decided"),
    (AlreadyDecided(replace(PENDING, status=TicketStatus.WITHDRAWN, decided_by="alice")), 409, "withdrawn"),
    (TicketExpired(replace(PENDING, status=TicketStatus.EXPIRED)), 409, "ticket_expired"),
    (NotAllowed("T-0123456789ab", "alice"), 403, "not_allowed"),
    (AlreadyApprovedByYou(replace(PENDING, approvals_needed=2, counted="bob=approvers"), "bob"), 409,
     "already_approved_by_you"),
    (NotRequester("T-0123456789ab", "bob"), 403, "not_requester"),
    (NotSettleable(DELIVERED), 409, "not_settleable"),
    (DatabaseFileGone("/tmp/expenses.db", replaced=False), 503, "database_file_gone"),
    (InputError("reason", "A rejection needs a reason; the requester is told it.", missing=True), 422,
     "reason_required"),
    (InputError("reason", "The reason must be text."), 422, "invalid_body"),
    (InputError("approver name", "Give a approver name, e.g. alice."), 422, "invalid_input"),
    (AmountError("above_maximum", "$260.00 is more than the $250.00 asked.", shown="$260.00",
                 most=Decimal("250"), approving=True), 422, "invalid_amount"),
    (ConversationInUse(["T-0123456789ab"]), 409, "conversation_in_use"),
    (StillPending("T-0123456789ab"), 409, "still_pending"),
    (AlreadyDelivered(DELIVERED), 409, "already_delivered"),
    (AlreadyDelivered(replace(APPROVED, settled_at=NOW, settled_by="carol")), 409, "already_settled"),
    (NotDelivered(Outcome.BUSY, APPROVED, "busy", "the app's database", timedelta(seconds=15)), 409,
     "conversation_busy"),
    (NotDelivered(Outcome.UNREACHABLE, APPROVED, "gone", "the memory of process 1"), 502,
     "conversation_unreachable"),
    (NotDelivered(Outcome.CONVERSATION_MISSING, APPROVED, "deleted", "the app's database"), 410,
     "conversation_missing"),
    (NotDelivered(Outcome.FAILED, APPROVED, "the model failed", "the app's database"), 502, "delivery_failed"),
    *[(ModelUnavailable("gemini-3.5-flash", "https://generativelanguage.googleapis.com", "HTTP 400", kind), 502,
       "model_unavailable") for kind in ModelUnavailable.NEXT],
]
ONLY_IN_THE_CHAT = [
    NotApproved("yacht", 500_000), NeedsNoApproval(Decimal("20"), Decimal("100")), UnusableUserId("Alice"),
    AnswerDisagrees("T-0123456789ab", "it says approved by mallory, the ledger records approved by bob"),
]
AT_START = [SchemaBehind("0001", "0005"), SettingsError("APPROVAL_THRESHOLD='lots' is not a number.")]


@pytest.mark.parametrize("refusal, status, code", API_ANSWERS, ids=[code for _, _, code in API_ANSWERS])
def test_the_api_answers_each_refusal_with_the_status_and_code_it_always_had(refusal, status, code):
    answer = refusal_error(refusal)
    assert (answer.status, answer.error) == (status, code)
    assert answer.message == refusal.message and answer.fix


@pytest.mark.parametrize("refusal", [r for r, _, _ in API_ANSWERS] + ONLY_IN_THE_CHAT + AT_START, ids=repr)
def test_every_refusal_has_a_message_and_a_next_step_each_surface_can_word(refusal: Refusal):
    assert re.fullmatch(r"[a-z_]+", refusal.code)
    for actions in (CLI, API, CHAT):
        next_step = refusal.next_for(actions)
        assert next_step and "{" not in next_step.replace('{"amount"', ""), (actions, next_step)
        assert refusal.sentence(actions) == f"{refusal.message} {next_step}"
    # The chat gets the same words, as the tool's error.
    assert tool_error(refusal) == {"status": "error", "error": refusal.sentence(CHAT)}


@pytest.mark.parametrize("kind", list(ModelUnavailable.NEXT))
def test_a_model_failure_is_told_apart_from_its_text_alone(kind):
    # ADK ends an SSE run with only the error's text: /run_sse still answers its message and fix apart.
    failure = ModelUnavailable("gemini-3.5-flash", "http://127.0.0.1:9", "ConnectError: refused.", kind)
    assert ModelUnavailable.parts(str(failure)) == (failure.message, failure.next_step)
    assert ModelUnavailable.parts(failure.message) is None


def test_a_next_step_names_each_surfaces_own_way_to_do_it():
    refusal = AlreadyDecided(APPROVED)  # recorded, not delivered yet
    assert refusal.next_for(CLI).endswith(f"deliver it with {EXPENSES} deliver T-0123456789ab.")
    assert refusal.next_for(API).endswith("deliver it with POST /api/approvals/T-0123456789ab/deliver.")
    assert refusal.next_for(CLI).replace(f"{EXPENSES} deliver T-0123456789ab", "X") == (
        refusal.next_for(API).replace("POST /api/approvals/T-0123456789ab/deliver", "X"))


@pytest.mark.parametrize("ticket, action", [
    (PENDING, "approve"), (APPROVED, "deliver"), (DELIVERED, "show"),
    (replace(APPROVED, delivery_error="gone", settled_at=NOW, settled_by="carol"), "show"),
], ids=["pending", "not-yet-failed", "delivered", "settled"])
def test_a_refused_settle_names_the_step_the_tickets_state_calls_for(ticket, action):
    next_step = NotSettleable(ticket).next_for(CLI)
    assert f"{EXPENSES} {action} {ticket.id}" in next_step
    # Delivering a decided ticket again does nothing, and a pending one has nothing to deliver.
    assert (f"{EXPENSES} deliver" in next_step) == (action == "deliver"), next_step


def test_the_cli_says_the_refusal_the_api_answers_with_a_command_for_the_route(sqlite_url):
    refused = cli.expenses("approve", "T-000000000000", "--approver", "bob", url=sqlite_url)

    api = refusal_error(TicketNotFound("T-000000000000")).body()
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"error: {api['message']} {api['fix'].replace('GET /api/approvals', f'{EXPENSES} inbox')}")
