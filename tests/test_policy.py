"""Approval policy as data: tiers by the requester's total, M-of-N by group, each approval one conditional UPDATE.

A policy file is checked at start, one line naming the field; without one, APPROVAL_THRESHOLD and DUAL_APPROVAL_ABOVE
are the same mechanism's two tiers. No approver counts twice, an approver counts only for a group the tier needs,
the first eligible rejection ends it, and racing approvers on SQLite and PostgreSQL never approve with fewer.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import update
from support.policies import policy_file
from support.tickets import open_ticket_for

from long_running_agent.desk import policy_of
from long_running_agent.ledger import AlreadyApprovedByYou, AlreadyDecided, Ledger, NotAllowed, TicketStatus
from long_running_agent.ledger.audit.evidence import Via, digest
from long_running_agent.ledger.need import EVERYONE, progress_text
from long_running_agent.ledger.policy.file import load
from long_running_agent.ledger.policy.rules import Policy, Rules, counted
from long_running_agent.ledger.storage.schema import DecisionRow
from long_running_agent.refusals.rules import NotAsShown, NotInGroup
from long_running_agent.settings import SettingsError, load_settings, parse_approvers

POLICY = policy_file((100, {"finance": 1}), (5000, {"finance": 2}), (20000, {"finance": 1, "cfo": 1}))
SELF_CFO = "[group.cfo]\nallow_self_approval = true\n"
APPROVERS = ("bob:tok-bbbbbbbb:finance,carol:tok-cccccccc:finance,dave:tok-dddddddd:cfo,"
             "erin:tok-eeeeeeee:finance+cfo,olga:tok-oooooooo:ops,alice:tok-aaaaaaaa:cfo")


def members(raw: str = APPROVERS) -> dict[str, frozenset[str]]:
    return {a.name: a.groups for a in parse_approvers(raw).values()}


def policy_at(tmp_path: Path, text: str = POLICY, raw: str = APPROVERS) -> Rules:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return load(path, members(raw))


@pytest.fixture
async def ledger(db_url, tmp_path):
    ledger = Ledger(db_url, policy=Policy(rules=policy_at(tmp_path)))
    yield ledger
    await ledger.close()


def test_a_tier_takes_the_highest_line_the_total_is_above(tmp_path):
    rules = policy_at(tmp_path)
    assert [rules.tier_for(cents)[0] for cents in (5_000, 10_001, 500_000, 500_001, 2_000_001)] == [1, 1, 1, 2, 3]
    assert rules.threshold == Decimal(100)


def test_without_a_file_the_two_settings_are_two_tiers_of_the_same_rules():
    rules = Rules.from_thresholds(Decimal(100), Decimal(5000))
    assert [(t.above, t.need) for t in rules.tiers] == [(Decimal(100), ((EVERYONE, 1),)),
                                                        (Decimal(5000), ((EVERYONE, 2),))]


def test_an_approver_in_two_groups_counts_where_they_are_needed():
    need = (("finance", 1), ("cfo", 1))
    both, finance = frozenset({"finance", "cfo"}), frozenset({"finance"})
    assert counted(need, {"erin": both, "bob": finance}) == {"erin": "cfo", "bob": "finance"}
    assert counted(need, {"bob": finance, "carol": finance}) == {"bob": "finance"}
    assert progress_text(need, {"bob": "finance"}) == "1 of 2: needs 1 more from cfo"


@pytest.mark.parametrize(("text", "raw", "names"), [
    (POLICY.replace("cfo = 1", "cxo = 1"), APPROVERS, "tier[3].need.cxo: no approver is in group cxo"),
    (POLICY.replace("above = 5000", "above = 50"), APPROVERS, "tier[2].above = 50 is not above tier[1].above"),
    (POLICY.replace("finance = 2", "finance = 4"), APPROVERS, "tier[2].need.finance: no configured approvers"),
    (POLICY, "bob:tok-bbbbbbbb:finance,dave:tok-dddddddd:cfo", "tier[2].need.finance: no configured approvers"),
    (POLICY + "[group.board]\nallow_self_approval = true\n", APPROVERS, "group.board: no approver is in group"),
    (POLICY.replace("above = 100", "above = -1"), APPROVERS, "tier[1].above = -1 must be a number of dollars"),
    (POLICY.replace("finance = 1 }", "finance = 0 }", 1), APPROVERS, "tier[1].need.finance = 0 must be a whole"),
    ("[[tiers]]\nabove = 1\n", APPROVERS, "tiers: unknown key"),
    ("[[tier]\n", APPROVERS, "is not TOML"),
])
def test_a_policy_that_cannot_work_stops_the_start_with_one_line_naming_the_field(monkeypatch, tmp_path, text, raw,
                                                                                   names):
    (tmp_path / "policy.toml").write_text(text)
    monkeypatch.setenv("APPROVAL_POLICY", str(tmp_path / "policy.toml"))
    monkeypatch.setenv("APPROVERS", raw)
    with pytest.raises(SettingsError) as error:
        policy_of(load_settings())  # as a desk reads it, at start
    assert error.value.message.startswith("APPROVAL_POLICY: ") and names in error.value.message
    assert "\n" not in error.value.message


def test_a_policy_file_and_the_settings_it_replaces_are_not_both_set(monkeypatch, tmp_path):
    (tmp_path / "policy.toml").write_text(POLICY)
    for name, value in (("APPROVAL_POLICY", str(tmp_path / "policy.toml")), ("APPROVERS", APPROVERS),
                        ("DUAL_APPROVAL_ABOVE", "3000")):
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match="unset APPROVAL_THRESHOLD and DUAL_APPROVAL_ABOVE"):
        load_settings()
    monkeypatch.delenv("DUAL_APPROVAL_ABOVE")
    assert policy_of(load_settings()).rules.tiers[2].need == (("finance", 1), ("cfo", 1))


async def test_the_requesters_total_not_the_single_amount_chooses_the_tier(ledger):
    first = await open_ticket_for(ledger, 400_000, purpose="flights")
    second = await open_ticket_for(ledger, 400_000, purpose="hotel")
    assert (first.tier, first.need, second.tier, second.need) == (1, "finance=1", 2, "finance=2")
    assert second.combined_cents == 800_000 and second.policy_version == ledger.policy.rules.version


async def test_m_of_n_by_group_needs_each_group_and_no_approver_counts_twice(ledger):
    ticket = await open_ticket_for(ledger, 2_500_000)
    assert ticket.still_missing == "0 of 2: needs 1 more from finance and 1 more from cfo"

    first = await ledger.tickets.decide(ticket.id, approver="bob", approve=True)
    assert (first.status, first.still_missing) == (TicketStatus.PENDING, "1 of 2: needs 1 more from cfo")
    with pytest.raises(AlreadyApprovedByYou):
        await ledger.tickets.decide(ticket.id, approver="bob", approve=True)
    with pytest.raises(NotInGroup, match="from your groups are all given"):  # finance's place is taken
        await ledger.tickets.decide(ticket.id, approver="carol", approve=True)
    with pytest.raises(NotInGroup, match="groups you are not in"):
        await ledger.tickets.decide(ticket.id, approver="olga", approve=True)
    last = await ledger.tickets.decide(ticket.id, approver="dave", approve=True)

    assert (last.status, last.counted_for) == (TicketStatus.APPROVED, {"bob": "finance", "dave": "cfo"})
    with pytest.raises(AlreadyDecided):
        await ledger.tickets.decide(ticket.id, approver="erin", approve=True)


async def test_someone_in_two_groups_moves_to_the_group_still_needed(ledger):
    ticket = await open_ticket_for(ledger, 2_500_000)
    await ledger.tickets.decide(ticket.id, approver="erin", approve=True)
    approved = await ledger.tickets.decide(ticket.id, approver="carol", approve=True)
    assert (approved.status, approved.counted_for) == (TicketStatus.APPROVED, {"erin": "cfo", "carol": "finance"})


async def test_the_requesters_own_approval_counts_only_where_self_approval_is_allowed_however_many_follow(
        db_url, tmp_path):
    """docs/policy.md's example: erin (finance and cfo) asks for $25,000 and approves it herself, which counts for
    cfo only; dave (cfo) adds nothing, and only a finance approver other than erin completes it."""
    ledger = Ledger(db_url, policy=Policy(rules=policy_at(tmp_path, POLICY + SELF_CFO)))
    try:
        ticket = await open_ticket_for(ledger, 2_500_000, user="erin")
        own = await ledger.tickets.decide(ticket.id, approver="erin", approve=True)
        assert (own.status, own.counted_for) == (TicketStatus.PENDING, {"erin": "cfo"})
        with pytest.raises(NotInGroup, match="at 1 of 2: needs 1 more from finance; its approvals from your groups"):
            await ledger.tickets.decide(ticket.id, approver="dave", approve=True)
        assert (await ledger.tickets.get(ticket.id)).still_missing == "1 of 2: needs 1 more from finance"
        approved = await ledger.tickets.decide(ticket.id, approver="carol", approve=True)

        assert (approved.status, approved.counted_for) == (TicketStatus.APPROVED, {"erin": "cfo", "carol": "finance"})
        document = await ledger.evidence(ticket.id)
        assert [(d["approver"], d["counted_for"]) for d in document["decisions"]] == [("erin", "cfo"),
                                                                                       ("carol", "finance")]
    finally:
        await ledger.close()


async def test_an_approver_who_left_the_group_no_longer_counts_and_their_place_is_open_again(db_url, tmp_path):
    """Membership is read at each approval: bob approved for finance, then left it (a restart with new APPROVERS)."""
    before = Ledger(db_url, policy=Policy(rules=policy_at(tmp_path)))
    ticket = await open_ticket_for(before, 600_000)  # finance = 2
    await before.tickets.decide(ticket.id, approver="bob", approve=True)
    await before.close()
    ledger = Ledger(db_url, policy=Policy(rules=policy_at(tmp_path, raw=APPROVERS.replace("bob:tok-bbbbbbbb:finance",
                                                                                         "bob:tok-bbbbbbbb:ops"))))
    try:
        now = await ledger.tickets.get(ticket.id)
        gone = "0 of 2: needs 2 more from finance (bob approved, but no longer counts: not in a group it needs now)"
        assert (now.still_missing, now.counted_for, now.no_longer_counting) == (gone, {}, ["bob"])
        with pytest.raises(AlreadyApprovedByYou, match=r"0 of 2: needs 2 more from finance \(bob approved"):
            await ledger.tickets.decide(ticket.id, approver="bob", approve=True)
        first = await ledger.tickets.decide(ticket.id, approver="carol", approve=True)
        assert (first.status, first.counted_for) == (TicketStatus.PENDING, {"carol": "finance"})
        assert first.still_missing.startswith("1 of 2: needs 1 more from finance (bob approved, but no longer")
        approved = await ledger.tickets.decide(ticket.id, approver="erin", approve=True)

        assert (approved.status, approved.counted_for) == (TicketStatus.APPROVED, {"carol": "finance",
                                                                                   "erin": "finance"})
        document = await ledger.evidence(ticket.id)
        assert [(d["approver"], d["counted_for"]) for d in document["decisions"]] == [
            ("bob", None), ("carol", "finance"), ("erin", "finance")]
    finally:
        await ledger.close()


async def test_the_first_rejection_by_an_eligible_approver_rejects_and_no_approval_follows(ledger):
    ticket = await open_ticket_for(ledger, 600_000)
    await ledger.tickets.decide(ticket.id, approver="bob", approve=True)
    with pytest.raises(NotInGroup):
        await ledger.tickets.decide(ticket.id, approver="olga", approve=False, reason="not ops' call")
    rejected = await ledger.tickets.decide(ticket.id, approver="carol", approve=False, reason="no receipt")
    assert (rejected.status, rejected.approvers) == (TicketStatus.REJECTED, [])
    with pytest.raises(AlreadyDecided):
        await ledger.tickets.decide(ticket.id, approver="erin", approve=True)


async def test_self_approval_only_where_a_group_allows_it(db_url, tmp_path):
    text = POLICY.replace("need = { finance = 1 }", "need = { cfo = 1 }", 1)
    for allowed in (False, True):
        extra = "[group.cfo]\nallow_self_approval = true\n" if allowed else ""
        ledger = Ledger(db_url, policy=Policy(rules=policy_at(tmp_path, text + extra)))
        ticket = await open_ticket_for(ledger, 20_000, user="alice", session=f"s-{allowed}")
        if allowed:
            assert (await ledger.tickets.decide(ticket.id, approver="alice", approve=True)).status is \
                TicketStatus.APPROVED
        else:
            with pytest.raises(NotAllowed):
                await ledger.tickets.decide(ticket.id, approver="alice", approve=True)
        await ledger.close()


async def test_each_decision_keeps_its_evidence_and_one_on_another_ticket_is_refused(ledger):
    ticket = await open_ticket_for(ledger, 600_000)
    other = await open_ticket_for(ledger, 600_000, purpose="hotel", session="s-2")
    with pytest.raises(NotAsShown):
        await ledger.tickets.decide(ticket.id, approver="bob", approve=True, via=Via("api", {}, digest(other)))
    via = Via("cli", {"os_user": "bob", "approver": "bob"}, digest(ticket))
    await ledger.tickets.decide(ticket.id, approver="bob", approve=True, amount="5000", reason="cap", via=via)
    await ledger.tickets.decide(ticket.id, approver="carol", approve=True, via=Via("slack", {"slack_user": "U1"}))

    document = await ledger.evidence(ticket.id)
    assert [(d["approver"], d["channel"], d["counted_for"], d["amount"]) for d in document["decisions"]] == [
        ("bob", "cli", "finance", 5000.0), ("carol", "slack", "finance", None)]
    assert document["decisions"][0]["principal"] == {"os_user": "bob", "approver": "bob"}
    assert {d["shown_sha256"] for d in document["decisions"]} == {digest(ticket)}
    assert (document["status"], document["approved_amount"]) == ("approved", 5000.0)
    assert document["policy"]["tier"] == 2 and document["policy"]["need"] == {"finance": 2}
    assert document["audit_chain"] == {"holds": True, "first_break": None, "decisions_match": True}

    async with ledger.engine.begin() as db:  # someone rewrites who approved, in the database
        await db.execute(update(DecisionRow).where(DecisionRow.approver == "carol").values(channel="api"))
    tampered = await ledger.evidence(ticket.id)
    assert [d["in_audit_chain"] for d in tampered["decisions"]] == [True, False]
    assert tampered["audit_chain"]["decisions_match"] is False


async def test_racing_approvers_fill_the_need_once_and_the_rest_are_refused(db_url, tmp_path):
    rules = policy_at(tmp_path)
    ledgers = [Ledger(db_url, policy=Policy(rules=rules)) for _ in range(3)]
    try:
        for round_ in range(3):
            ticket = await open_ticket_for(ledgers[0], 600_000, session=f"race-{round_}")
            results = await asyncio.gather(*(
                ledger.tickets.decide(ticket.id, approver=who, approve=True)
                for ledger, who in zip(ledgers, ("bob", "carol", "erin"), strict=True)), return_exceptions=True)
            refused = [r for r in results if isinstance(r, Exception)]
            assert len(refused) == 1 and isinstance(refused[0], AlreadyDecided | NotInGroup), results
            final = await ledgers[0].tickets.get(ticket.id)
            assert final.status is TicketStatus.APPROVED and len(final.counted_for) == 2
            assert set(final.counted_for.values()) == {"finance"}
    finally:
        for ledger in ledgers:
            await ledger.close()
