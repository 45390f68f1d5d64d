"""The approval policy on every surface: what a ticket still needs, each decision's evidence, `expenses policy`.

A policy file of two tiers, `finance` above $100 and `finance` plus `cfo` above $10,000, and approvers in groups:
the API's ticket JSON, the webhook's text, the CLI's inbox and report say what is missing; the API, the inbox page
and the CLI record how each decision arrived; `expenses policy` shows the tiers and which one a request would get.
`make web`'s server runs in-process; the CLI's commands run on the test's desk.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from support.desks import TestDesk
from support.policies import policy_file
from support.receiver import SECRET
from support.servers import in_process
from support.tickets import open_ticket_for

from long_running_agent.cli import commands, render
from long_running_agent.cli.entry import parser
from long_running_agent.delivery.courier import Courier, Outcome
from long_running_agent.ledger import Ledger, TicketNotFound
from long_running_agent.ledger.audit import evidence
from long_running_agent.refusals.values import InputError
from long_running_agent.settings import parse_approvers
from long_running_agent.slack.messages import Buttons, event_text, updated_message
from long_running_agent.transcript import Transcript

POLICY = policy_file((100, {"finance": 1}), (10000, {"finance": 1, "cfo": 1}), self_approval=("cfo",))
TOKENS = {"bob": "bob-token-1", "dave": "dave-token-1", "carol": "carol-token-1", "alice": "alice-token-1"}
APPROVERS = "bob:bob-token-1:finance,dave:dave-token-1:finance,carol:carol-token-1:cfo,alice:alice-token-1"
HEADER = "X-Forwarded-User"


@pytest.fixture
def groups(tmp_path, sqlite_url, configure):
    """The test's desk under the two-tier policy file, its approvers in groups; the file's path."""
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    configure(approval_policy=path, approvers=parse_approvers(APPROVERS), trusted_user_header=HEADER)
    return path


def by(name: str, **headers: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"} | headers


async def cli(desk: TestDesk, *argv: str) -> int:
    """An `expenses` command, run on the test's desk in this process."""
    args = parser().parse_args(argv)
    return await commands.COMMANDS[args.command](desk, args, Transcript(verbose=False))


# --- what is missing -------------------------------------------------------------------------


async def test_the_api_says_what_each_ticket_still_needs_and_who_counted_for_which_group(desk, groups):
    async with in_process(desk) as client:  # first: the server's store shares the ledger's engine
        ticket = await open_ticket_for(desk.ledger, 1_200_000)
        before = (await client.get(f"/api/approvals/{ticket.id}", headers=by("carol"))).json()["ticket"]
        first = await client.post(f"/api/approvals/{ticket.id}/approve", headers=by("bob"), json={})

    assert (before["tier"], before["need"], before["policy_version"]) == (2, {"finance": 1, "cfo": 1},
                                                                          desk.policy.rules.version)
    assert before["missing"] == "0 of 2: needs 1 more from finance and 1 more from cfo"
    assert before["counted_for"] == [] and before["shown_sha256"] == evidence.digest(ticket)
    assert first.status_code == 200 and first.json()["delivery"] == Outcome.WAITING.value
    after = first.json()["ticket"]
    assert after["missing"] == "1 of 2: needs 1 more from cfo"
    assert (after["approved_by"], after["counted_for"]) == (["bob"], [{"approver": "bob", "group": "finance"}])


async def test_the_cli_inbox_and_report_say_what_is_missing_by_group(desk, groups, capsys):
    ticket = await open_ticket_for(desk.ledger, 1_200_000)
    await cli(desk, "inbox")
    assert "[needs 1 from finance and 1 from cfo]" in capsys.readouterr().out

    await cli(desk, "approve", ticket.id, "--approver", "dave")
    said = capsys.readouterr().out
    assert f"Ticket {ticket.id}: 1 of 2: needs 1 more from cfo; approved by dave for finance." in said
    await cli(desk, "inbox")
    assert "[1 of 2: needs 1 more from cfo; approved by dave for finance]" in capsys.readouterr().out
    await cli(desk, "show", ticket.id)
    assert "\nApprovals: 1 of 2: needs 1 more from cfo; approved by dave for finance\n" in capsys.readouterr().out


async def test_an_approval_whose_approver_left_the_group_shows_as_no_longer_counting_on_every_surface(
        desk, groups, configure, capsys):
    before = Ledger(desk.settings.database_url, policy=desk.policy)  # the process before the restart
    ticket = await open_ticket_for(before, 1_200_000)  # 1 from finance and 1 from cfo
    await before.tickets.decide(ticket.id, approver="bob", approve=True)
    await before.close()
    configure(approvers=APPROVERS.replace("bob:bob-token-1:finance", "bob:bob-token-1:ops"))  # a restart
    gone = ("0 of 2: needs 1 more from finance and 1 more from cfo (bob approved, but no longer counts: not in a "
            "group it needs now)")

    async with in_process(desk) as client:
        shown = (await client.get(f"/api/approvals/{ticket.id}", headers=by("carol"))).json()["ticket"]
        assert (shown["missing"], shown["counted_for"], shown["no_longer_counting"]) == (gone, [], ["bob"])
        blocks = updated_message(shown, None, Buttons(forms=True))["blocks"]
        fields = [f["text"] for b in blocks for f in b.get("fields", [])]
        assert f"*Approvals*\n{gone}" in fields
        await cli(desk, "show", ticket.id)
        assert f"\nApprovals: {gone}\n" in capsys.readouterr().out
        await cli(desk, "inbox")
        assert f"[{gone}]" in capsys.readouterr().out

        taken = await client.post(f"/api/approvals/{ticket.id}/approve", headers=by("dave"), json={})  # finance
        assert taken.status_code == 200, taken.text
        assert taken.json()["ticket"]["missing"] == ("1 of 2: needs 1 more from cfo (bob approved, but no longer "
                                                      "counts: not in a group it needs now)")


async def test_a_requesters_own_approval_leaves_the_other_group_missing_on_every_surface(desk, tmp_path, sqlite_url,
                                                                                       configure, capsys):
    """docs/policy.md's example: erin, in finance and cfo, approves her own $25,000; cfo allows it, finance not."""
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    configure(approval_policy=path, approvers=parse_approvers(APPROVERS + ",erin:erin-token-1:finance+cfo"))
    async with in_process(desk) as client:  # first: the server's store shares the ledger's engine
        ticket = await open_ticket_for(desk.ledger, 2_500_000, user="erin")
        await cli(desk, "approve", ticket.id, "--approver", "erin")
        capsys.readouterr()
        refused = await client.post(f"/api/approvals/{ticket.id}/approve", headers=by("carol"), json={})  # cfo
        assert refused.status_code == 403 and refused.json()["error"] == "not_in_group", refused.text
        assert "1 of 2: needs 1 more from finance" in refused.json()["message"]
        shown = (await client.get(f"/api/approvals/{ticket.id}", headers=by("carol"))).json()["ticket"]
    assert (shown["missing"], shown["counted_for"]) == ("1 of 2: needs 1 more from finance",
                                                        [{"approver": "erin", "group": "cfo"}])
    assert await cli(desk, "show", ticket.id) == 0
    assert "\nApprovals: 1 of 2: needs 1 more from finance; approved by erin for cfo\n" in capsys.readouterr().out


async def test_under_the_default_policy_the_progress_stays_in_plain_words(desk, sqlite_url):
    ledger = desk.ledger
    ticket = await open_ticket_for(ledger, 600_000)  # above DUAL_APPROVAL_ABOVE: two approvers
    small = await open_ticket_for(ledger, 20_000, user="erin")

    assert (render.waiting(ticket), render.waiting(small)) == ("needs 2 approvers", None)
    once = await ledger.tickets.decide(ticket.id, approver="bob", approve=True)
    assert render.waiting(once) == "1 of 2: needs 1 more approver; approved by bob"


async def test_the_webhook_says_what_is_missing_and_each_later_approval_is_its_own_event(desk, tmp_path, sqlite_url,
                                                                                        configure):
    path = tmp_path / "policy.toml"
    path.write_text("[[tier]]\nabove = 100\nneed = { finance = 2, cfo = 1 }\n")
    configure(approval_policy=path, approvers=parse_approvers(APPROVERS),
              webhook_url="http://127.0.0.1:9/hook", webhook_secret=SECRET)
    ledger = desk.ledger
    ticket = await open_ticket_for(ledger, 50_000)
    for approver in ("bob", "dave"):
        await ledger.tickets.decide(ticket.id, approver=approver, approve=True)

    sent = [json.loads(n.payload) for n in await ledger.outbox.of_ticket(ticket.id)]
    assert [n["type"] for n in sent] == ["ticket.requested", "ticket.first_approval", "ticket.approval"]
    assert [event_text(n["type"], n["ticket"]).split(": ", 1)[1] for n in sent[1:]] == [
        "1 of 3: needs 1 more from finance and 1 more from cfo.", "2 of 3: needs 1 more from cfo."]
    assert event_text("ticket.approval", sent[2]["ticket"]).startswith(f"dave approved ticket {ticket.id} ($500.00")
    assert "it needs 2 from finance and 1 from cfo" in event_text("ticket.requested", sent[0]["ticket"])
    latest = sent[2]["ticket"]
    assert latest["counted_for"] == [{"approver": "bob", "group": "finance"}, {"approver": "dave", "group": "finance"}]
    message = updated_message(latest, None, Buttons(forms=True))
    fields = [f["text"] for b in message["blocks"] for f in b.get("fields", [])]
    assert "*Approvals*\n2 of 3: needs 1 more from cfo" in fields
    assert message["text"].endswith("2 of 3: needs 1 more from cfo; approved by bob for finance and dave for finance")


# --- evidence from each surface ----------------------------------------------------------------


async def test_each_surface_records_its_channel_and_whom_it_authenticated(desk, groups):
    async with in_process(desk) as client:
        ledger = desk.ledger
        ticket = await open_ticket_for(ledger, 1_200_000)
        await client.post(f"/api/approvals/{ticket.id}/approve", json={"shown": evidence.digest(ticket)},
                          headers=by("bob", **{"X-Approval-Channel": "inbox", HEADER: "bob@example.com"}))
        await cli(desk, "reject", ticket.id, "--approver", "carol", "--reason", "not this quarter")
        shown = await client.get(f"/api/approvals/{ticket.id}/evidence", headers=by("dave"))
        unsigned = await client.get(f"/api/approvals/{ticket.id}/evidence")
        unknown = await client.get("/api/approvals/T-000000000000/evidence", headers=by("dave"))

    assert shown.status_code == 200 and shown.json() == await ledger.evidence(ticket.id)
    [inbox, cli_decision] = shown.json()["decisions"]
    assert (inbox["channel"], inbox["principal"], inbox["counted_for"]) == (
        "inbox", {"token_of": "bob", "trusted_user": "bob@example.com"}, "finance")
    assert inbox["shown_sha256"] == evidence.digest(ticket)
    assert (cli_decision["channel"], cli_decision["decision"]) == ("cli", "reject")
    assert set(cli_decision["principal"]) == {"os_user", "approver"}
    assert cli_decision["principal"]["approver"] == "carol"
    assert (unsigned.status_code, unsigned.json()["error"]) == (401, "missing_token")
    assert (unknown.status_code, unknown.json()["error"]) == (404, "ticket_not_found")


async def test_a_decision_on_another_ticket_than_the_one_shown_is_refused_with_409(desk, groups):
    async with in_process(desk) as client:
        ledger = desk.ledger
        ticket = await open_ticket_for(ledger, 1_200_000)
        other = await open_ticket_for(ledger, 1_300_000, session="s-2")
        crossed = await client.post(f"/api/approvals/{ticket.id}/approve", headers=by("bob"),
                                    json={"shown": evidence.digest(other)})
        api_header = await client.post(f"/api/approvals/{ticket.id}/approve", json={},
                                       headers=by("bob", **{"X-Approval-Channel": "anything"}))

    assert crossed.status_code == 409 and crossed.json()["error"] == "not_as_shown"
    assert crossed.json()["fix"]
    [decision] = (await ledger.evidence(ticket.id))["decisions"]  # the refused one left nothing
    assert (decision["channel"], decision["principal"]) == ("api", {"token_of": "bob"})
    assert api_header.status_code == 200


async def test_the_cli_prints_a_tickets_evidence_as_json(desk, groups, capsys):
    ledger = desk.ledger
    ticket = await open_ticket_for(ledger, 1_200_000)
    await Courier(desk).decide(ticket.id, approver="bob", approve=True, channel="cli",
                             principal={"os_user": "ops", "approver": "bob"})
    capsys.readouterr()

    assert await cli(desk, "evidence", ticket.id) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == await ledger.evidence(ticket.id)
    assert printed["policy"]["need"] == {"finance": 1, "cfo": 1} and printed["decisions"][0]["channel"] == "cli"
    with pytest.raises(TicketNotFound):
        await cli(desk, "evidence", "T-000000000000")


# --- expenses policy ---------------------------------------------------------------------------


async def test_policy_shows_the_tiers_groups_and_members_by_name_only(desk, groups, capsys):
    assert await cli(desk, "policy") == 0
    out = capsys.readouterr().out

    assert f"Approval policy: {groups} (version {desk.policy.rules.version})" in out
    assert "tier 1  above $100.00        needs 1 from finance" in out
    assert "tier 2  above $10,000.00     needs 1 from finance and 1 from cfo" in out
    assert "approvers  alice, bob, carol, dave" in out and "finance    bob, dave" in out
    assert "cfo        carol" in out and "Self-approval: cfo" in out
    assert not any(token in out for token in TOKENS.values())


async def test_policy_for_an_amount_adds_the_requesters_day_and_names_who_may_approve(desk, groups, capsys):
    await open_ticket_for(desk.ledger, 300_000)  # alice asked for $3,000 today

    await cli(desk, "policy", "--amount", "8000")
    alone = capsys.readouterr().out
    await cli(desk, "policy", "--amount", "8000", "--requester", "Alice")
    theirs = capsys.readouterr().out

    assert "$8,000.00 alone" in alone and "Tier 1 (above $100.00): it needs 1 from finance." in alone
    assert "Who may approve: finance: bob, dave." in alone
    assert "$8,000.00 from alice, with $3,000.00 asked for or paid today: $11,000.00 in all." in theirs
    assert "Tier 2 (above $10,000.00): it needs 1 from finance and 1 from cfo." in theirs
    assert "Who may approve: finance: bob, dave; cfo: carol." in theirs


async def test_policy_without_approvers_or_a_file_is_the_two_settings_and_anyone_but_the_requester(desk, sqlite_url,
                                                                                                 configure, capsys):
    configure(approval_threshold=Decimal(200))
    await cli(desk, "policy", "--amount", "6000", "--requester", "alice")
    out = capsys.readouterr().out

    assert "Approval policy: APPROVAL_THRESHOLD and DUAL_APPROVAL_ABOVE" in out
    assert "tier 2  above $5,000.00      needs 2 approvers" in out
    assert "APPROVERS is unset" in out and "Who may approve: anyone but alice." in out
    with pytest.raises(InputError, match="--requester goes with --amount"):
        await cli(desk, "policy", "--requester", "alice")


# --- the banners: python main.py's "Policy:" line, make web's ------------------------------------


def test_the_banners_name_the_policy_file_and_each_of_its_tiers(desk, groups):
    assert desk.policy.in_words() == (
        f"{groups} (2 tiers: above $100 1 from finance; above $10,000 1 from finance and 1 from cfo)")


def test_without_a_policy_file_the_banners_name_the_threshold_and_the_daily_rules(desk, sqlite_url, configure):
    configure(approval_threshold=Decimal(200))
    assert desk.policy.in_words() == (
        "up to $200 paid at once (once per purpose, $250 a day); more needs an approver")
