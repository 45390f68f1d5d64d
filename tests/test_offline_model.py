"""The offline model's decisions, on a table of inputs, from requests ADK really builds."""

from __future__ import annotations

from decimal import Decimal

import pytest
from google.adk.models import LlmRequest
from google.genai import types
from support.conversation import Conversation, event_texts, pending_calls, responses
from support.desks import TestDesk
from support.models import RecordedOfflineModel, make_runner, runner_with

from long_running_agent.agent import build_agent
from long_running_agent.model.amounts import find_amount, find_money
from long_running_agent.model.offline import OFFLINE_MODEL_NAME, OfflineExpenseModel, next_turn

DECLARATIONS = types.Tool(function_declarations=[
    types.FunctionDeclaration(name="ask_for_approval"), types.FunctionDeclaration(name="reimburse"),
])


def instruction(desk: TestDesk) -> str:
    """The agent's instruction (agent.py) on the test desk's settings: the offline model reads its limits there."""
    return str(build_agent(desk, OFFLINE_MODEL_NAME).instruction)


def request(desk: TestDesk, *contents: types.Content) -> LlmRequest:
    return LlmRequest(
        contents=list(contents),
        config=types.GenerateContentConfig(system_instruction=instruction(desk), tools=[DECLARATIONS]),
    )


def user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def approval_response(status: str, **extra) -> list[types.Content]:
    call = types.FunctionCall(name="ask_for_approval", args={"purpose": "team lunch", "amount": 250.0})
    response = {"status": status, "ticket_id": "T-1"} | extra
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
def test_requests_with_amount_and_purpose_call_the_right_tool(desk, text, tool, args):
    [part] = next_turn(request(desk, user(text)))
    assert part.function_call is not None, part.text
    assert (part.function_call.name, part.function_call.args) == (tool, args)


ONLY_REIMBURSE = types.Tool(function_declarations=[types.FunctionDeclaration(name="reimburse")])
ONLY_APPROVAL = types.Tool(function_declarations=[types.FunctionDeclaration(name="ask_for_approval")])


@pytest.mark.parametrize("tools, text, tool, args", [
    # An agent whose reimburse waits for ADK's tool confirmation has no ask_for_approval to call.
    (ONLY_REIMBURSE, "Reimburse $250 for the team lunch", "reimburse", {"purpose": "team lunch", "amount": 250.0}),
    (ONLY_REIMBURSE, "Reimburse $42.50 for a taxi", "reimburse", {"purpose": "taxi", "amount": 42.5}),
    (ONLY_APPROVAL, "Reimburse $250 for the team lunch", "ask_for_approval",
     {"purpose": "team lunch", "amount": 250.0}),
    (ONLY_APPROVAL, "Reimburse $42.50 for a taxi", None, "the reimburse tool is not available"),
])
def test_each_request_goes_to_a_tool_the_agent_has(desk, tools, text, tool, args):
    only = LlmRequest(contents=[user(text)], config=types.GenerateContentConfig(
        system_instruction=instruction(desk), tools=[tools]))
    [part] = next_turn(only)
    if tool:
        assert part.function_call is not None, part.text
        assert (part.function_call.name, part.function_call.args) == (tool, args)
    else:
        assert part.function_call is None and args in part.text


def test_the_threshold_is_the_one_the_agents_instruction_states(desk, configure):
    # The instruction states the threshold the app enforces (agent.py, from the settings); the model reads it there.
    configure(approval_threshold=Decimal("200"))
    assert "Up to $200: call reimburse" in instruction(desk)
    [part] = next_turn(request(desk, user("Reimburse $150 for a train ticket")))
    assert part.function_call.name == "reimburse"
    [part] = next_turn(request(desk, user("Reimburse $250 for a train ticket")))
    assert part.function_call.name == "ask_for_approval"
    # Not the settings: a request whose instruction states no threshold gets the default one, $100.
    bare = LlmRequest(contents=[user("Reimburse $150 for a train ticket")],
                      config=types.GenerateContentConfig(tools=[DECLARATIONS]))
    assert next_turn(bare)[0].function_call.name == "ask_for_approval"


def test_the_maximum_is_the_one_the_agents_instruction_states(desk, configure):
    # A figure no tool call can carry exactly is refused by the model itself, against the instruction's maximum.
    configure(max_amount=Decimal("2000000"))
    assert "at most $2,000,000" in instruction(desk)
    [part] = next_turn(request(desk, user("Reimburse $100,000,000,000,000 for the office")))
    assert part.function_call is None and "above the $2,000,000 limit" in part.text


@pytest.mark.parametrize("text, expected", [
    ("Please reimburse the team lunch", "How much"),
    ("Reimburse $250", "What was the $250.00 for?"),
    ("Reimburse 1.250,50 EUR for the hotel", "only reimburse US dollars"),
    ("What's the weather like?", "I handle expense reimbursements"),
    ("", "I handle expense reimbursements"),
])
def test_incomplete_or_unrelated_requests_get_a_question_or_help(desk, text, expected):
    [part] = next_turn(request(desk, user(text)))
    assert part.function_call is None and expected in part.text


@pytest.mark.parametrize("text", [
    "Reimburse $250 for ", "Reimburse $250 for the", "Reimburse $250 for it.", "Reimburse me $250",
    "Reimburse $250 for my, please", "Reimburse $250 on that, thanks",
])
def test_a_purpose_of_only_filler_words_is_asked_for_not_used(desk, text):
    [part] = next_turn(request(desk, user(text)))
    assert part.function_call is None and "What was the $250.00 for?" in part.text


def test_a_question_while_a_ticket_waits_gets_its_status(desk):
    contents = approval_response("pending")[:3] + [
        types.Content(role="model", parts=[types.Part(text="Ticket T-1 is waiting.")]), user("Any news?")]
    [part] = next_turn(request(desk, *contents))
    assert part.function_call is None and "T-1 for $250.00 (team lunch) is still waiting" in part.text
    decided = approval_response("rejected", by="bob")[:3] + [user("Any news?")]
    assert "Ticket T-1 for $250.00 (team lunch) was rejected by bob" in next_turn(request(desk, *decided))[0].text


def test_purpose_given_earlier_is_remembered(desk):
    contents = [user("Please reimburse the team lunch"),
                types.Content(role="model", parts=[types.Part(text="How much was it?")]), user("$250")]
    [part] = next_turn(request(desk, *contents))
    assert part.function_call.args == {"purpose": "team lunch", "amount": 250.0}


@pytest.mark.parametrize("status, extra, expected", [
    ("pending", {}, "Ticket T-1 is waiting for an approver"),
    ("rejected", {"by": "bob", "reason": "no receipt"}, "rejected by bob (no receipt)"),
    ("withdrawn", {"by": "alice"}, "Ticket T-1 for $250.00 (team lunch) is withdrawn; nothing was paid"),
    ("expired", {}, "expired before anyone decided"),
    ("error", {"error": "bad amount"}, "bad amount"),
])
def test_approval_outcomes_are_explained(desk, status, extra, expected):
    [part] = next_turn(request(desk, *approval_response(status, **extra)))
    assert part.function_call is None and expected in part.text


def test_approved_ticket_leads_to_reimburse_with_the_original_request(desk):
    [part] = next_turn(request(desk, *approval_response("approved", by="bob", purpose="something else")))
    assert part.function_call.name == "reimburse"
    assert part.function_call.args == {"purpose": "team lunch", "amount": 250.0}


def test_an_approval_of_less_than_asked_is_paid_at_the_approved_amount(desk):
    [part] = next_turn(request(desk, *approval_response("approved", by="bob", amount=200.0, asked=250.0, reason="cap")))
    assert part.function_call.args == {"purpose": "team lunch", "amount": 200.0}


@pytest.mark.parametrize("payload, expected", [
    ({"status": "paid", "amount": 250.0, "purpose": "team lunch", "payout_id": "P-1"}, "was paid (payout P-1)"),
    ({"status": "already_paid", "payout_id": "P-1"}, "already paid"),
    ({"status": "error", "error": "No approved ticket"}, "could not pay it: No approved ticket"),
])
def test_payout_results_are_confirmed_or_relayed(desk, payload, expected):
    contents = [user("x"), types.Content(role="user", parts=[types.Part(
        function_response=types.FunctionResponse(name="reimburse", response=payload))])]
    assert expected in next_turn(request(desk, *contents))[0].text


def small_refusal(desk: TestDesk, status: dict, tools: types.Tool = DECLARATIONS) -> LlmRequest:
    """A reimburse call for $100 and the tool's answer `status`, as ADK would send them."""
    call = types.FunctionCall(name="reimburse", args={"purpose": "same laptop", "amount": 100.0})
    contents = [
        user("Reimburse $100 for the same laptop"),
        types.Content(role="model", parts=[types.Part(function_call=call)]),
        types.Content(role="user", parts=[types.Part(
            function_response=types.FunctionResponse(name="reimburse", response=status))]),
    ]
    return LlmRequest(contents=contents, config=types.GenerateContentConfig(
        system_instruction=instruction(desk), tools=[tools]))


NEEDS_APPROVAL = {"status": "needs_approval", "reason": "same_purpose", "purpose": "same laptop", "amount": 100.0,
                  "message": "You were already reimbursed $100.00 for same laptop today (UTC) without approval."}


@pytest.mark.parametrize("status, tools, tool, args, expected", [
    (NEEDS_APPROVAL, DECLARATIONS, "ask_for_approval", {"purpose": "same laptop", "amount": 100.0}, None),
    (NEEDS_APPROVAL | {"purpose": "something else", "amount": 5.0}, DECLARATIONS,
     "ask_for_approval", {"purpose": "same laptop", "amount": 100.0}, None),
    (NEEDS_APPROVAL, types.Tool(function_declarations=[types.FunctionDeclaration(name="reimburse")]),
     None, None, "already reimbursed $100.00 for same laptop"),
])
def test_a_small_payout_sent_to_an_approver_is_asked_for_with_the_same_request(
        desk, status, tools, tool, args, expected):
    [part] = next_turn(small_refusal(desk, status, tools))
    if tool:
        assert (part.function_call.name, part.function_call.args) == (tool, args)
    else:
        assert part.function_call is None and expected in part.text


def test_a_pending_small_ticket_is_explained_with_its_why(desk):
    why = "You have been reimbursed $200.00 today (UTC) without approval; the daily limit for that is $250.00."
    [part] = next_turn(request(desk, *approval_response("pending", why=why)))
    assert part.function_call is None
    assert part.text.startswith(why) and "ticket T-1" in part.text and "waiting for approval" in part.text


@pytest.mark.parametrize("text, amount", [
    ("$1,234.56", 1234.56), ("USD 99", 99), ("99 usd", 99), ("spent 12.5 on", 12.5), ("no money here", None),
])
def test_amount_forms(text, amount):
    found = find_amount(text)
    assert (float(found[0]) if found else None) == amount


# The amount protocol, in two tables: a message leads either to one call with
# exactly the amount and purpose written, or to a question and no call at all.
@pytest.mark.parametrize("text, tool, args", [
    ("Reimburse $1.5k for the team offsite", "ask_for_approval", {"purpose": "team offsite", "amount": 1500.0}),
    ("Reimburse $2K for the conference", "ask_for_approval", {"purpose": "conference", "amount": 2000.0}),
    ("Reimburse $1.25k for the hotel", "ask_for_approval", {"purpose": "hotel", "amount": 1250.0}),
    ("Reimburse $1,250.50 for the hotel", "ask_for_approval", {"purpose": "hotel", "amount": 1250.5}),
    ("Reimburse $1 000 for the hotel", "ask_for_approval", {"purpose": "hotel", "amount": 1000.0}),
    ("Reimburse $1\u00a0000 for the hotel", "ask_for_approval", {"purpose": "hotel", "amount": 1000.0}),
    ("Reimburse $1\u2009000 for the hotel", "ask_for_approval", {"purpose": "hotel", "amount": 1000.0}),
    ("Reimburse $1\u202f000 for the hotel", "ask_for_approval", {"purpose": "hotel", "amount": 1000.0}),
    ("Reimburse 1 000 dollars for the hotel", "ask_for_approval", {"purpose": "hotel", "amount": 1000.0}),
    ("Reimburse $42.5 for a taxi", "reimburse", {"purpose": "taxi", "amount": 42.5}),
    ("Reimburse $250 for the team\nlunch with clients", "ask_for_approval",
     {"purpose": "team lunch with clients", "amount": 250.0}),
    ("Reimburse $250\nfor the team lunch", "ask_for_approval", {"purpose": "team lunch", "amount": 250.0}),
    ("Reimburse $300 for the hotel, 2 nights", "ask_for_approval", {"purpose": "hotel, 2 nights", "amount": 300.0}),
    ("Reimburse $250 for the team lunch on March 3", "ask_for_approval",
     {"purpose": "team lunch on March 3", "amount": 250.0}),
    ("Reimburse $250 for lunch on 3 March 2024", "ask_for_approval",
     {"purpose": "lunch on 3 March 2024", "amount": 250.0}),
    ("Reimburse $45 for a taxi on 2024-03-03 at 10:30", "reimburse",
     {"purpose": "taxi on 2024-03-03 at 10:30", "amount": 45.0}),
    ("Reimburse $90 for lunch with 4 colleagues", "reimburse", {"purpose": "lunch with 4 colleagues", "amount": 90.0}),
    ("Reimburse $90 for lunch on 3/4 at 1pm", "reimburse", {"purpose": "lunch on 3/4 at 1pm", "amount": 90.0}),
    ("Reimburse $300 for the hotel March 3-5, 2024", "ask_for_approval",
     {"purpose": "hotel March 3-5, 2024", "amount": 300.0}),
    ("Reimburse $20 for A4 paper, receipt #123", "reimburse", {"purpose": "A4 paper, receipt #123", "amount": 20.0}),
    ("I spent 2 nights and $300 on the conference hotel", "ask_for_approval",
     {"purpose": "conference hotel", "amount": 300.0}),
])
def test_an_amount_written_in_dollars_is_used_exactly(desk, text, tool, args):
    [part] = next_turn(request(desk, user(text)))
    assert part.function_call is not None, part.text
    assert (part.function_call.name, part.function_call.args) == (tool, args)


@pytest.mark.parametrize("text, question", [
    ("Reimburse $100.009 for printer toner", "$100.009 has more than two decimals"),
    ("Reimburse $250.999 for the team lunch", "$250.999 has more than two decimals"),
    ("Reimburse $1.234567k for the hotel", "$1.234567k has more than two decimals"),
    ("reimburse 100.009 for printer toner", "100.009 has more than two decimals"),
    ("Reimburse $1e309 for the hotel", "cannot read $1e309"),
    ("Reimburse $1e3 for the hotel", "cannot read $1e3"),
    ("Reimburse 1e2 dollars for the hotel", "cannot read 1e2"),
    ("Reimburse $12,50 for lunch", "cannot read $12,50"),
    ("Reimburse $1'000 for the hotel", "cannot read $1'000"),
    ("Reimburse $1 00 for the hotel", "more than one amount ($1, 00)"),
    ("Reimburse $10-12 for lunch", "cannot read $10-12"),
    ("Reimburse $.50 for a stamp", "cannot read $.50"),
    ("Reimburse $1.5 k for the offsite", "Did you mean $1,500.00?"),
    ("Reimburse $2 grand for the offsite", "Did you mean $2,000.00?"),
    ("Reimburse $1.5m for the office", "Did you mean $1,500,000.00?"),
    ("Reimburse $2M for the office", "Did you mean $2,000,000.00?"),
    ("Reimburse $250 EUR for the hotel", "only reimburse US dollars"),
    ("Reimburse €250 for the hotel", "only reimburse US dollars"),
    ("Reimburse 250€ for the hotel", "only reimburse US dollars"),
    ("Reimburse 250 euros for the hotel", "only reimburse US dollars"),
    ("Reimburse £40 for a taxi", "only reimburse US dollars"),
    ("Reimburse GBP 40 for a taxi", "only reimburse US dollars"),
    ("I paid 40 pounds for a taxi", "only reimburse US dollars"),
    ("Reimburse ¥5000 for dinner", "only reimburse US dollars"),
    ("Reimburse 5000 JPY for dinner", "only reimburse US dollars"),
    ("Reimburse CHF 90 for a train", "only reimburse US dollars"),
    ("Reimburse C$250 for the hotel", "only reimburse US dollars"),
    ("Reimburse 250 Canadian dollars for the hotel", "only reimburse US dollars"),
    ("Reimburse 250 EUR ($270) for the hotel", "only reimburse US dollars"),
    ("Reimburse $250 for the hotel, paid in euros", "only reimburse US dollars"),
    ("Reimburse 250EUR for the hotel", "only reimburse US dollars"),
    ("Reimburse $250/night for the hotel", "Is $250 the total"),
    ("Reimburse $250 per night for the hotel", "Is $250 the total"),
    ("Reimburse $250 x 2 tickets for the concert", "Is $250 the total"),
    ("Reimburse 2 x $250 for concert tickets", "more than one amount (2, $250)"),
    ("Reimburse $40 for a taxi, room 12 250 for the hotel", "more than one amount ($40, 12 250)"),
    ("Reimburse $40 for a taxi and lunch250", "more than one amount ($40, lunch250)"),
    ("Reimburse $250 for lunch and 40 for a taxi", "more than one amount ($250, 40)"),
    ("Reimburse $250 for the 2024 offsite", "more than one amount ($250, 2024)"),
])
def test_an_unclear_amount_gets_a_question_and_no_call(desk, text, question):
    [part] = next_turn(request(desk, user(text)))
    assert part.function_call is None
    assert question in part.text


@pytest.mark.parametrize("text, token", [
    ("$100.009", "$100.009"), ("$1e309", "$1e309"), ("$1.5k", "$1.5k"), ("$1 000", "$1 000"),
    ("-$50", "-$50"), ("USD 1,250.50", "1,250.50"), ("$10-12", "$10-12"),
])
def test_a_number_is_read_whole_never_a_prefix(text, token):
    assert [m.text for m in find_money(text)] == [token]


def test_dates_counts_and_labels_are_not_amounts():
    text = "On March 3, 2024 at 10:30, 2 nights for 4 people, 10% off, room 12, flight #34, the 3rd, 2024-03-03"
    assert find_money(text) == []


def test_a_purpose_from_a_message_sent_back_for_its_amounts_is_not_reused(desk):
    contents = [user("Reimburse $250 for lunch and 40 for a taxi"),
                types.Content(role="model", parts=[types.Part(text="Please send one expense at a time.")]),
                user("$250")]
    [part] = next_turn(request(desk, *contents))
    assert part.function_call is None and "What was the $250.00 for?" in part.text


async def test_an_amount_with_fractions_of_a_cent_pays_nothing_and_opens_no_ticket(desk, sqlite_url):
    chat = await Conversation(make_runner(desk, sqlite_url)).start()

    events = await chat.say("Reimburse $100.009 for printer toner")

    assert [c for e in events for c in e.get_function_calls()] == []
    assert responses(events, "reimburse") == responses(events, "ask_for_approval") == []
    assert "$100.009" in event_texts(events)[-1]
    ledger = desk.ledger
    assert await ledger.payouts.find() == [] and await ledger.tickets.count() == 0


async def test_reports_usage_metadata_and_reads_the_real_adk_request(desk, sqlite_url):
    model = RecordedOfflineModel()
    chat = await Conversation(runner_with(desk, model, sqlite_url)).start()
    events = await chat.say("Please reimburse $250 for the team lunch")
    assert pending_calls(events) and "waiting for an approver" in event_texts(events)[-1]
    names = {d.name for t in model.requests[0].config.tools for d in t.function_declarations}
    assert names == {"ask_for_approval", "reimburse", "withdraw_request"}
    responses = [r async for r in OfflineExpenseModel().generate_content_async(model.requests[0])]
    assert responses[0].usage_metadata.total_token_count > 0
    assert OfflineExpenseModel().model == OFFLINE_MODEL_NAME


# Several expenses in one message: one call each, in one turn, or a question.
TEAM_LUNCH, CONFERENCE, TAXI = ("team lunch", 250.0), ("conference ticket", 480.0), ("taxi", 45.0)


@pytest.mark.parametrize("text, expected", [
    ("Reimburse $250 for the team lunch and $480 for the conference ticket",
     [("ask_for_approval", *TEAM_LUNCH), ("ask_for_approval", *CONFERENCE)]),
    ("I spent $45 on a taxi and $250 on the team lunch", [("reimburse", *TAXI), ("ask_for_approval", *TEAM_LUNCH)]),
    ("Please reimburse: team lunch $250; conference ticket $480",
     [("ask_for_approval", *TEAM_LUNCH), ("ask_for_approval", *CONFERENCE)]),
    ("Taxi $45, hotel $300, parking $20",
     [("reimburse", "Taxi", 45.0), ("ask_for_approval", "hotel", 300.0), ("reimburse", "parking", 20.0)]),
    ("Reimburse $250 for lunch\n$40 for a taxi", [("ask_for_approval", "lunch", 250.0), ("reimburse", "taxi", 40.0)]),
    ("Reimburse $300 for the hotel, 2 nights and $45 for a taxi",
     [("ask_for_approval", "hotel, 2 nights", 300.0), ("reimburse", *TAXI)]),
    ("Reimburse $250 for the team lunch, $480 for the conference ticket and $45 for a taxi, thanks",
     [("ask_for_approval", *TEAM_LUNCH), ("ask_for_approval", *CONFERENCE), ("reimburse", *TAXI)]),
])
def test_a_message_with_several_expenses_makes_one_call_for_each(desk, text, expected):
    parts = next_turn(request(desk, user(text)))
    assert [(p.function_call.name, p.function_call.args["purpose"], p.function_call.args["amount"])
            for p in parts] == expected


@pytest.mark.parametrize("text, question", [
    ("Reimburse $250 for lunch and taxi $45", "I see several amounts ($250, $45)"),
    ("Reimburse $250 $480 for lunch", "I see several amounts ($250, $480)"),
    ("$250 and $480 for the conference", "I see several amounts ($250, $480)"),
    ("Reimburse $250 for lunch and $40.005 for a taxi", "more than one amount ($250, $40.005)"),
])
def test_several_expenses_that_cannot_be_told_apart_get_a_question(desk, text, question):
    [part] = next_turn(request(desk, user(text)))
    assert part.function_call is None and question in part.text


def two_pending(*then: types.Content) -> list[types.Content]:
    """Two tickets asked for in one turn, both waiting, as ADK sends them (no call ids)."""
    return [
        user("Reimburse $250 for the team lunch and $480 for the conference ticket"),
        types.Content(role="model", parts=[
            types.Part(function_call=types.FunctionCall(name="ask_for_approval", args=dict(zip(
                ("purpose", "amount"), TEAM_LUNCH, strict=True)))),
            types.Part(function_call=types.FunctionCall(name="ask_for_approval", args=dict(zip(
                ("purpose", "amount"), CONFERENCE, strict=True)))),
        ]),
        types.Content(role="user", parts=[
            types.Part(function_response=types.FunctionResponse(
                name="ask_for_approval", response={"status": "pending", "ticket_id": "T-000000000001"})),
            types.Part(function_response=types.FunctionResponse(
                name="ask_for_approval", response={"status": "pending", "ticket_id": "T-000000000002"})),
        ]),
        types.Content(role="model", parts=[types.Part(text="Both are waiting.")]),
        *then,
    ]


WITH_CANCEL = types.Tool(function_declarations=[*DECLARATIONS.function_declarations,
                                                types.FunctionDeclaration(name="withdraw_request")])


def with_cancel(*contents: types.Content) -> LlmRequest:
    return LlmRequest(contents=list(contents), config=types.GenerateContentConfig(tools=[WITH_CANCEL]))


def test_each_waiting_ticket_is_told_with_its_own_amount_and_purpose(desk):
    parts = next_turn(request(desk, *two_pending()[:3]))
    assert [p.function_call for p in parts] == [None, None]
    assert "$250.00 (team lunch)" in parts[0].text and "T-000000000001" in parts[0].text
    assert "$480.00 (conference ticket)" in parts[1].text and "T-000000000002" in parts[1].text


@pytest.mark.parametrize("text, ticket", [
    ("Please cancel my conference ticket request", "T-000000000002"),
    ("withdraw the team lunch one", "T-000000000001"),
    ("Cancel T-000000000002 please", "T-000000000002"),
])
def test_a_withdrawal_names_the_one_waiting_ticket_it_means(text, ticket):
    [part] = next_turn(with_cancel(*two_pending(user(text))))
    assert (part.function_call.name, part.function_call.args) == ("withdraw_request", {"ticket_id": ticket})


@pytest.mark.parametrize("contents, expected", [
    (two_pending(user("cancel it")), "Which request should I withdraw? Waiting: T-000000000001: $250.00 for team"),
    ([user("never mind, cancel my request")], "nothing to withdraw"),
])
def test_a_withdrawal_that_names_no_single_waiting_ticket_gets_a_question(contents, expected):
    [part] = next_turn(with_cancel(*contents))
    assert part.function_call is None and expected in part.text


def test_a_withdrawn_ticket_is_confirmed_and_no_longer_waits():
    cancel = types.FunctionCall(name="withdraw_request", args={"ticket_id": "T-000000000002"})
    contents = two_pending(
        user("cancel the conference ticket"), types.Content(role="model", parts=[types.Part(function_call=cancel)]),
        types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
            name="withdraw_request", response={"status": "withdrawn", "ticket_id": "T-000000000002"}))]))
    [part] = next_turn(with_cancel(*contents))
    assert "Withdrawn: ticket T-000000000002 for $480.00 (conference ticket)" in part.text
    [news] = next_turn(with_cancel(*contents, types.Content(role="model", parts=[part]), user("any news?")))
    assert "T-000000000001" in news.text and "T-000000000002" not in news.text


def test_a_decision_beside_the_other_calls_of_its_turn_is_the_only_news(desk):
    # ADK sends the approval of the first ticket beside the second's latest answer (still pending).
    contents = two_pending()[:2] + [types.Content(role="user", parts=[
        types.Part(function_response=types.FunctionResponse(
            name="ask_for_approval", response={"status": "approved", "ticket_id": "T-000000000001", "by": "bob"})),
        types.Part(function_response=types.FunctionResponse(
            name="ask_for_approval", response={"status": "pending", "ticket_id": "T-000000000002"})),
    ])]
    [part] = next_turn(request(desk, *contents))
    assert (part.function_call.name, part.function_call.args) == ("reimburse", dict(zip(
        ("purpose", "amount"), TEAM_LUNCH, strict=True)))
    # Once paid (turn_order.py shows the payout id), it is not paid again when the second is decided.
    contents[-1].parts[0].function_response.response["payout_id"] = "P-1"
    contents[-1].parts[1].function_response.response = {"status": "rejected", "ticket_id": "T-000000000002",
                                                        "by": "bob", "reason": "no receipt"}
    [part] = next_turn(request(desk, *contents))
    assert part.function_call is None and "T-000000000002 for $480.00 (conference ticket) was rejected" in part.text
