"""One amount rule on every surface: the chat, the CLI, the API and the inbox field.

The rule is `amount` in ledger/inputs.py: exact dollars and cents, more than
zero, at most MAX_REIMBURSEMENT (an approver's amount: at most the amount
asked). Every surface calls it, so a huge, negative, NaN, infinite or
malformed amount gets a refusal of that surface's kind - a tool error the
model relays, one line on the CLI, a 422 from the API - and never a decimal
error, a traceback or a 500. The same hostile amounts are tried on each.
"""

from __future__ import annotations

import math
from decimal import Decimal

import httpx
import pytest
from support import cli
from support.conversation import Conversation, calls, event_texts, responses
from support.http import as_approver, request_over_run
from support.models import ScriptedModel, call_part, make_runner, runner_with, text_part
from support.processes import run

from long_running_agent.ledger import inputs

MOST = Decimal("1000000")  # MAX_REIMBURSEMENT's default
TWENTY_NINE_NINES = "9" * 29  # one digit more than Python's decimals hold by default
FORTY_DIGITS = "9" * 40


# --- the rule -------------------------------------------------------------------------


def short(value: object) -> str:
    """A test id: Python cannot even print an integer of 5,000 digits."""
    if isinstance(value, int) and value.bit_length() > 100:
        return f"int of {value.bit_length()} bits"
    shown = repr(value)
    return shown if len(shown) <= 30 else shown[:27] + "..."


@pytest.mark.parametrize("raw, problem", [
    (1e308, inputs.ABOVE_MAXIMUM), (10**40, inputs.ABOVE_MAXIMUM), (TWENTY_NINE_NINES, inputs.ABOVE_MAXIMUM),
    ("$" + FORTY_DIGITS, inputs.ABOVE_MAXIMUM), (10**5000, inputs.ABOVE_MAXIMUM), ("9" * 5000, inputs.ABOVE_MAXIMUM),
    ("1,000,000.01", inputs.ABOVE_MAXIMUM),
    (-1e308, inputs.NOT_POSITIVE), (-(10**40), inputs.NOT_POSITIVE), ("-5", inputs.NOT_POSITIVE),
    ("$-5", inputs.NOT_POSITIVE), ("-$5", inputs.NOT_POSITIVE), (0, inputs.NOT_POSITIVE),
    ("-$-5", inputs.NOT_A_NUMBER), ("--5", inputs.NOT_A_NUMBER), ("$$5", inputs.NOT_A_NUMBER),
    (math.nan, inputs.NOT_A_NUMBER), (math.inf, inputs.NOT_A_NUMBER), (-math.inf, inputs.NOT_A_NUMBER),
    (Decimal("sNaN"), inputs.NOT_A_NUMBER), ("NaN", inputs.NOT_A_NUMBER), ("Infinity", inputs.NOT_A_NUMBER),
    ("1e5", inputs.NOT_A_NUMBER), ("", inputs.NOT_A_NUMBER), (None, inputs.NOT_A_NUMBER),
    (True, inputs.NOT_A_NUMBER), ([200] * 100, inputs.NOT_A_NUMBER),
    (100.009, inputs.FRACTION_OF_A_CENT), ("0.001", inputs.FRACTION_OF_A_CENT),
    # Digits other than 0-9: Python reads them, a person checking the amount may not.
    ("\u0661\u0662\u0663", inputs.NOT_A_NUMBER), ("\uff10\uff14\uff10\uff10\uff10", inputs.NOT_A_NUMBER),
], ids=short)
def test_the_amount_rule_says_what_is_wrong_and_never_raises_a_decimal_error(raw, problem):
    with pytest.raises(inputs.AmountError) as refusal:
        inputs.amount(raw, most=MOST)

    assert (refusal.value.field, refusal.value.problem, refusal.value.most) == ("amount", problem, MOST)
    assert len(str(refusal.value)) < 200  # a 5,000-digit figure is not repeated back


@pytest.mark.parametrize("raw, dollars", [
    (250, "250.00"), (42.5, "42.50"), ("1,250.50", "1250.50"), ("$12", "12.00"), (" 7.1 ", "7.10"),
    (Decimal("0.01"), "0.01"), ("1,000,000.00", "1000000.00"), (1e6, "1000000.00"),
])
def test_the_amount_rule_takes_exact_dollars_up_to_the_maximum(raw, dollars):
    assert inputs.amount(raw, most=MOST) == Decimal(dollars)


# --- the chat -------------------------------------------------------------------------


@pytest.mark.parametrize("message, says", [
    (f"Reimburse ${TWENTY_NINE_NINES} for a yacht", "$1,000,000"),
    (f"Reimburse ${FORTY_DIGITS} for a yacht", "$1,000,000"),
    ("Reimburse $999,999,999,999,999,999,999,999,999,999.99 for a yacht", "$1,000,000"),
    ("Reimburse $9999999999999999999999999999999999999.5k for a yacht", "$1,000,000"),
    ("Reimburse $5,000,000 for a yacht", "$1,000,000"),  # within a float: the tool refuses it
    (f"Reimburse -${TWENTY_NINE_NINES} for a yacht", "more than zero"),
    ("Reimburse $\u0661\u0660\u0660\u0660\u0660 for a yacht", "cannot read"),
])
async def test_the_offline_model_answers_a_huge_amount_and_opens_nothing(desk, sqlite_url, message, says):
    chat = await Conversation(make_runner(desk, sqlite_url)).start()

    events = await chat.say(message)

    assert says in event_texts(events)[-1]
    assert await desk.ledger.tickets.with_status() == [] and await desk.ledger.payouts.find() == []
    assert responses(await chat.say("Reimburse $20 for a coffee"), "reimburse")[0]["status"] == "paid"


@pytest.mark.parametrize("tool", ["ask_for_approval", "reimburse"])
@pytest.mark.parametrize("amount", [
    1e308, -1e308, 1e40, float(TWENTY_NINE_NINES), 10**40, TWENTY_NINE_NINES, "-$-5", "--5", "NaN",
], ids=short)
async def test_a_tool_given_a_huge_or_malformed_amount_answers_an_error(desk, sqlite_url, tool, amount):
    """What Gemini could send: the declaration says float, and nothing holds a model to it."""
    model = ScriptedModel(script=[call_part(tool, purpose="yacht", amount=amount), text_part("Could not.")])
    chat = await Conversation(runner_with(desk, model, sqlite_url)).start()

    events = await chat.say("Reimburse a yacht")

    [answer] = responses(events, tool)
    assert answer["status"] == "error" and len(calls(events, tool)) == 1
    assert await desk.ledger.tickets.with_status() == [] and await desk.ledger.payouts.find() == []


# --- the CLI --------------------------------------------------------------------------


def _one_line_refusal(result) -> bool:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    return (result.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: ")
            and "Traceback" not in result.stdout + result.stderr and "decimal" not in result.stderr)


def test_a_request_with_a_forty_digit_amount_is_refused_in_one_line(sqlite_url):
    result = cli.expenses("request", f"Reimburse ${FORTY_DIGITS} for a yacht", "--user", "alice", url=sqlite_url)

    assert _one_line_refusal(result), (result.returncode, result.stdout, result.stderr)
    assert "$1,000,000" in result.stdout  # the agent's answer, in the transcript
    assert "No pending tickets." in cli.expenses("inbox", url=sqlite_url).stdout


@pytest.mark.subprocess
def test_approve_amount_and_the_demo_amount_refuse_hostile_amounts_in_one_line(sqlite_url):
    ticket_id = cli.request_ticket(sqlite_url)  # $250 for the team lunch
    approvals = {
        f"approve --amount {amount}": ["approve", ticket_id, "--approver", "bob", f"--amount={amount}", "--reason", "x"]
        for amount in (TWENTY_NINE_NINES, "1e308", "-$-5", "--5", "NaN", "-5")
    }
    demos = {f"demo --amount {amount}": [f"--amount={amount}"] for amount in (FORTY_DIGITS, "nan")}  # main.py

    refused = {name: _one_line_refusal(cli.expenses(*args, url=sqlite_url)) for name, args in approvals.items()} | {
        name: _one_line_refusal(run(*args, url=sqlite_url)) for name, args in demos.items()}

    assert refused == dict.fromkeys(approvals | demos, True)
    shown = cli.expenses("show", ticket_id, url=sqlite_url)
    assert '"status": "pending"' in shown.stdout and "Paid:" not in shown.stdout


# --- the API and the inbox field --------------------------------------------------------


# The bodies as a client writes them: JSON numbers Python reads as a float, an
# integer or infinity, and text as the inbox field sends whatever was typed.
HOSTILE_BODIES = {
    "1e308": "1e308",
    "10**40": str(10**40),
    "29 nines": TWENTY_NINE_NINES,
    "1e400, read as infinity": "1e400",
    "NaN": "NaN",
    "-1e308": "-1e308",
    "29 nines as text": f'"{TWENTY_NINE_NINES}"',
    "-$-5 as text": '"-$-5"',
    "--5 as text": '"--5"',
    "Infinity as text": '"Infinity"',
}


@pytest.mark.subprocess
async def test_the_api_answers_422_to_every_hostile_amount_and_decides_nothing(server):
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
        _session_id, _call, ticket_id = await request_over_run(client)
        headers = as_approver("bob") | {"Content-Type": "application/json"}

        answers = {
            case: await client.post(f"/api/approvals/{ticket_id}/approve", headers=headers,
                                    content=f'{{"amount": {amount}, "reason": "cap"}}')
            for case, amount in HOSTILE_BODIES.items()
        }

        assert {case: (a.status_code, a.json().get("error")) for case, a in answers.items()} == dict.fromkeys(
            HOSTILE_BODIES, (422, "invalid_amount"))
        assert all(a.json()["message"] and a.json()["fix"] for a in answers.values())
        shown = (await client.get(f"/api/approvals/{ticket_id}", headers=as_approver("bob"))).json()
        assert shown["ticket"]["status"] == "pending" and shown["payouts"] == []
