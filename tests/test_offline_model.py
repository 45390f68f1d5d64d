"""The offline model's decisions, on a table of inputs, from requests ADK really builds."""

from __future__ import annotations

import pytest
from google.adk.models import LlmRequest
from google.genai import types
from support.conversation import Conversation, pending_calls, texts
from support.models import RecordedOfflineModel, runner_with

from long_running_agent.offline_model import OFFLINE_MODEL_NAME, OfflineExpenseModel, decide, find_amount

DECLARATIONS = types.Tool(function_declarations=[
    types.FunctionDeclaration(name="ask_for_approval"), types.FunctionDeclaration(name="reimburse"),
])


def request(*contents: types.Content, threshold: str = "100") -> LlmRequest:
    return LlmRequest(
        contents=list(contents),
        config=types.GenerateContentConfig(
            system_instruction=f"Amounts up to ${threshold} are paid directly.", tools=[DECLARATIONS]
        ),
    )


def user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def approval_response(status: str, **extra) -> list[types.Content]:
    call = types.FunctionCall(name="ask_for_approval", args={"purpose": "team lunch", "amount": 250.0})
    response = {"status": status, "ticket_id": "T-1", "purpose": "team lunch", "amount": 250.0} | extra
    return [
        user("Reimburse $250 for the team lunch"),
        types.Content(role="model", parts=[types.Part(function_call=call)]),
        types.Content(role="user", parts=[types.Part(
            function_response=types.FunctionResponse(name="ask_for_approval", response=response))]),
    ]


@pytest.mark.parametrize("text, tool, args", [
    ("Please reimburse $250 for the team lunch", "ask_for_approval", {"purpose": "team lunch", "amount": 250.0}),
    ("reimburse 250 dollars for a hotel night.", "ask_for_approval", {"purpose": "hotel night", "amount": 250.0}),
    ("USD 1,250.50 for the conference ticket please", "ask_for_approval",
     {"purpose": "conference ticket", "amount": 1250.5}),
    ("I spent $42.50 on a taxi to the airport", "reimburse", {"purpose": "taxi to the airport", "amount": 42.5}),
    ("Reimburse $100 for printer toner", "reimburse", {"purpose": "printer toner", "amount": 100.0}),
    ("Reimburse $100.01 for printer toner", "ask_for_approval", {"purpose": "printer toner", "amount": 100.01}),
])
def test_requests_with_amount_and_purpose_call_the_right_tool(text, tool, args):
    part = decide(request(user(text)))
    assert part.function_call is not None, part.text
    assert (part.function_call.name, part.function_call.args) == (tool, args)


def test_threshold_is_read_from_the_instruction():
    part = decide(request(user("Reimburse $150 for a train ticket"), threshold="200"))
    assert part.function_call.name == "reimburse"


@pytest.mark.parametrize("text, expected", [
    ("Please reimburse the team lunch", "How much"),
    ("Reimburse $250", "What was the $250.00 for?"),
    ("Reimburse 1.250,50 EUR for the hotel", "only reimburse US dollars"),
    ("What's the weather like?", "I handle expense reimbursements"),
    ("", "I handle expense reimbursements"),
])
def test_incomplete_or_unrelated_requests_get_a_question_or_help(text, expected):
    part = decide(request(user(text)))
    assert part.function_call is None and expected in part.text


def test_a_question_while_a_ticket_waits_gets_its_status():
    contents = approval_response("pending")[:3] + [
        types.Content(role="model", parts=[types.Part(text="Ticket T-1 is waiting.")]), user("Any news?")]
    part = decide(request(*contents))
    assert part.function_call is None and "T-1 for $250.00 (team lunch) is still waiting" in part.text
    decided = approval_response("rejected", decided_by="bob")[:3] + [user("Any news?")]
    assert "Ticket T-1 was rejected by bob" in decide(request(*decided)).text


def test_purpose_given_earlier_is_remembered():
    contents = [user("Please reimburse the team lunch"),
                types.Content(role="model", parts=[types.Part(text="How much was it?")]), user("$250")]
    part = decide(request(*contents))
    assert part.function_call.args == {"purpose": "team lunch", "amount": 250.0}


@pytest.mark.parametrize("status, extra, expected", [
    ("pending", {}, "Ticket T-1 is waiting for an approver"),
    ("rejected", {"decided_by": "bob", "reason": "no receipt"}, "rejected by bob (no receipt)"),
    ("expired", {}, "expired before anyone decided"),
    ("error", {"error": "bad amount"}, "bad amount"),
])
def test_approval_outcomes_are_explained(status, extra, expected):
    part = decide(request(*approval_response(status, **extra)))
    assert part.function_call is None and expected in part.text


def test_approved_ticket_leads_to_reimburse_with_the_original_request():
    part = decide(request(*approval_response("approved", purpose="something else", amount=9999.0)))
    assert part.function_call.name == "reimburse"
    assert part.function_call.args == {"purpose": "team lunch", "amount": 250.0}


@pytest.mark.parametrize("payload, expected", [
    ({"status": "paid", "amount": 250.0, "purpose": "team lunch", "payout_id": "P-1"}, "was paid (payout P-1)"),
    ({"status": "already_paid", "payout_id": "P-1"}, "already paid"),
    ({"status": "error", "error": "No approved ticket"}, "could not pay it: No approved ticket"),
])
def test_payout_results_are_confirmed_or_relayed(payload, expected):
    contents = [user("x"), types.Content(role="user", parts=[types.Part(
        function_response=types.FunctionResponse(name="reimburse", response=payload))])]
    assert expected in decide(request(*contents)).text


@pytest.mark.parametrize("text, amount", [
    ("$1,234.56", 1234.56), ("USD 99", 99), ("99 usd", 99), ("spent 12.5 on", 12.5), ("no money here", None),
])
def test_amount_forms(text, amount):
    found = find_amount(text)
    assert (float(found[0]) if found else None) == amount


async def test_reports_usage_metadata_and_reads_the_real_adk_request(sqlite_url):
    model = RecordedOfflineModel()
    chat = await Conversation(runner_with(model, sqlite_url)).start()
    events = await chat.say("Please reimburse $250 for the team lunch")
    assert pending_calls(events) and "waiting for an approver" in texts(events)[-1]
    names = {d.name for t in model.requests[0].config.tools for d in t.function_declarations}
    assert names == {"ask_for_approval", "reimburse"}
    responses = [r async for r in OfflineExpenseModel().generate_content_async(model.requests[0])]
    assert responses[0].usage_metadata.total_token_count > 0
    assert OfflineExpenseModel().model == OFFLINE_MODEL_NAME
