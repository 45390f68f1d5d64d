"""One rule per input, on the chat, the CLI and the API alike, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta

import pytest
from support import cli
from support.conversation import Conversation, event_texts, responses
from support.models import ScriptedModel, call_part, make_runner, runner_with, text_part

from long_running_agent.ledger import inputs


@pytest.mark.parametrize("raw, canonical", [
    ("alice", "alice"), ("Alice", "alice"), ("ALICE", "alice"), (" alice ", "alice"), ("alice\t", "alice"),
    ("Bob.Smith@Example.com", "bob.smith@example.com"), ("test_user", "test_user"),
    ("ａｌｉｃｅ", "alice"),  # full-width letters are the same letters (NFKC)
])
def test_names_have_one_canonical_spelling(raw, canonical):
    assert inputs.name(raw) == canonical


@pytest.mark.parametrize("raw", [
    "", "   ", "alice\u200b", "\u0430lice", "al\x00ice", "a" * 65, "alice bob", "-alice", "alice\x1b[31m", 42,
])
def test_names_that_could_hide_who_someone_is_are_refused(raw):
    with pytest.raises(inputs.InputError):
        inputs.name(raw)


def test_terminal_output_shows_control_characters_instead_of_obeying_them():
    assert inputs.printable("lunch\x1b]0;pwned\x07") == "lunch\\x1b]0;pwned\\x07"


def test_the_approver_cli_applies_the_same_rules_on_both_backends(db_url):
    ticket_id = cli.request_ticket(db_url)

    cases = {
        "own ticket, other spelling": ["approve", ticket_id, "--approver", "Alice"],
        "invisible character": ["approve", ticket_id, "--approver", "bob\u200b"],
        "name too long": ["approve", ticket_id, "--approver", "b" * 200],
        "empty reason": ["reject", ticket_id, "--approver", "bob", "--reason", "  "],
        "reason too long": ["reject", ticket_id, "--approver", "bob", "--reason", "x" * 10_000],
        "nobody asks": ["request", "Reimburse $250 for a desk", "--user", ""],
    }
    for case, args in cases.items():
        result = cli.expenses(*args, url=db_url)
        assert result.returncode == 1, (case, result.stdout, result.stderr)
        assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr, (case, result.stderr)

    shown = cli.expenses("show", ticket_id, url=db_url)
    assert '"status": "pending"' in shown.stdout


def test_the_cli_never_prints_control_characters_from_the_ledger(desk, sqlite_url):
    async def open_raw() -> str:
        # Written straight into the ledger, as an older version or another tool could have.
        ticket = await desk.ledger.tickets.open(
            app_name="long_running_agent", user_id="alice", session_id="s", call_id="c", call_name="ask_for_approval",
            purpose="lunch\x1b]0;pwned\x07", amount_cents=25000, ttl=timedelta(hours=1),
        )
        await desk.close()
        return ticket.id

    ticket_id = asyncio.run(open_raw())
    for command in (["inbox"], ["show", ticket_id]):
        out = cli.expenses(*command, url=sqlite_url).stdout
        assert "\x1b" not in out and "\\x1b]0;pwned" in out, out


async def test_a_requester_with_a_second_spelling_gets_a_note_and_no_ticket(desk, sqlite_url):
    chat = await Conversation(make_runner(desk, sqlite_url), user_id="Alice").start()

    events = await chat.say("Please reimburse $250 for the team lunch")

    assert responses(events, "ask_for_approval") == []
    assert "user id 'Alice'" in event_texts(events)[0]
    assert await desk.ledger.tickets.with_status() == []


async def test_an_overlong_message_is_answered_and_not_stored(desk, sqlite_url):
    chat = await Conversation(make_runner(desk, sqlite_url)).start()

    events = await chat.say("Reimburse $20 for coffee. " * 400)

    assert responses(events, "reimburse") == [] and "at most 4,000" in event_texts(events)[-1]
    session = await chat.runner.session_service.get_session(
        app_name=chat.runner.app_name, user_id="alice", session_id=chat.session_id)
    assert not any("coffee. Reimburse" in text for text in event_texts(session.events))


@pytest.mark.parametrize("tool", ["ask_for_approval", "reimburse"])
async def test_purposes_with_control_characters_are_refused_by_the_tools(desk, sqlite_url, tool):
    model = ScriptedModel(script=[call_part(tool, purpose="lunch\x1b[2J with clients", amount=250.0), text_part("ok")])
    chat = await Conversation(runner_with(desk, model, sqlite_url)).start()

    events = await chat.say("Reimburse $250 for lunch")

    [answer] = responses(events, tool)
    assert answer["status"] == "error" and "invisible character, U+001B" in answer["error"]
    assert await desk.ledger.tickets.with_status() == [] and await desk.ledger.payouts.find() == []


# Each probe that passed an earlier purpose rule, and what the refusal must name.
INVISIBLE = [("team\u00addinner", "U+00AD SOFT HYPHEN, at character 5"),
             ("team dinner \u2615\ufe0f", "U+FE0F VARIATION SELECTOR-16, at character 14"),
             ("team \u2066dinner\u2069", "U+2066 LEFT-TO-RIGHT ISOLATE, at character 6"),
             ("team dinner\U000e0032", "U+E0032 TAG DIGIT TWO, at character 12"),
             ("team\u3164dinner", "U+3164 HANGUL FILLER, at character 5"),
             ("team\u200ddinner", "U+200D ZERO WIDTH JOINER, at character 5")]
LOOK_ALIKE = [("office \u0455\u0440\u0430\u0441\u0435", "Cyrillic and Latin"),  # a whole word in Cyrillic
              ("lunch f\u0585r the team", "Armenian and Latin"), ("s\u0435rver", "Cyrillic and Latin")]


@pytest.mark.parametrize("raw, named", INVISIBLE)
def test_a_purpose_with_an_invisible_character_is_refused_naming_it_and_where(raw, named):
    with pytest.raises(inputs.InputError, match=re.escape(named)):
        inputs.purpose(raw)


@pytest.mark.parametrize("raw, scripts", LOOK_ALIKE)
def test_a_purpose_mixing_look_alike_scripts_is_refused(raw, scripts):
    with pytest.raises(inputs.InputError, match=f"mixes {scripts} letters that look alike"):
        inputs.purpose(raw)


@pytest.mark.parametrize("raw", ["обед с командой", "Zürich offsite", "naïve café", "team dinner 🍽", "ｓｅｒｖｅｒ"])
def test_a_purpose_in_one_alphabet_or_with_accents_or_an_emoji_is_kept(raw):
    assert inputs.purpose(raw)
