"""Who must approve what, and the numbers the ledger applies: tiers, approver groups, whether an approval counts.

A tier needs approvals from groups (`finance = 2`, or `finance = 1, cfo = 1`). Each approver counts once, for one
group: `counted` finds the assignment that counts the most of them (a matching), so someone in two groups counts
where they are needed. The ledger stores the assignment on the ticket ("bob=finance", need.py), and an approval that
does not make it grow is refused (approving.py); when it covers the whole need the ticket is approved (docs/policy.md).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from decimal import Decimal
from typing import NamedTuple

from ...names import TicketStatus
from ..inputs import requester_of
from ..need import EVERYONE, Need, counted_text, need_words, parse_counted
from ..records import Ticket

# Where the rules come from without APPROVAL_POLICY: the two settings, as two tiers (`Rules.from_thresholds`).
THRESHOLDS = "APPROVAL_THRESHOLD and DUAL_APPROVAL_ABOVE"


class Approver(NamedTuple):
    """One entry of APPROVERS (`bob:TOKEN:finance+cfo`): a name and the groups it is in, EVERYONE among them."""

    name: str
    groups: frozenset[str] = frozenset({EVERYONE})


@dataclass(frozen=True)
class Tier:
    """Above `above` dollars (the requester's total that chose it), approvals from these groups decide."""

    above: Decimal
    need: Need

    @property
    def size(self) -> int:
        return sum(count for _, count in self.need)


@dataclass(frozen=True)
class Rules:
    """The approval policy: tiers from the lowest up, who is in which group, and where self-approval is allowed."""

    tiers: tuple[Tier, ...]
    # Approver name -> their groups (EVERYONE too); None when APPROVERS is unset: anyone but the requester decides.
    members: Mapping[str, frozenset[str]] | None = None
    self_approval: frozenset[str] = frozenset()
    source: str = THRESHOLDS
    version: str = field(init=False)

    def __post_init__(self) -> None:
        # What a ticket records it was opened under: the tiers and the groups' options, not who is in them.
        shape = {"tiers": [[str(t.above), list(t.need)] for t in self.tiers], "self": sorted(self.self_approval)}
        digest = hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()
        object.__setattr__(self, "version", digest[:12])

    @property
    def threshold(self) -> Decimal:
        """The lowest tier's `above`: up to it, the daily rules pay at once; above it, a tier decides."""
        return self.tiers[0].above

    def tier_for(self, total_cents: int) -> tuple[int, Tier]:
        """The tier (numbered from 1) the requester's total chooses: the highest it is above, else the lowest."""
        chosen = 1
        for number, tier in enumerate(self.tiers, 1):
            if total_cents > int(tier.above * 100):
                chosen = number
        return chosen, self.tiers[chosen - 1]

    def groups_of(self, approver: str) -> frozenset[str]:
        if self.members is None:
            return frozenset({EVERYONE})
        return self.members.get(approver, frozenset())

    def eligible(self, ticket: Ticket, approver: str) -> frozenset[str]:
        """The groups of the ticket's need an approval by `approver` may count for now: their own, and for the
        requester only those that allow self-approval."""
        groups = self.groups_of(approver) & {group for group, _ in ticket.needed}
        return groups & self.self_approval if requester_of(ticket.user_id) == approver else groups

    def recount(self, ticket: Ticket) -> Ticket:
        """The ticket with its approvals as they count under these rules now: an approver who left the groups their
        approval counted for no longer counts, and their place is open again (docs/policy.md). A decided ticket
        stays as it was decided."""
        if ticket.status is not TicketStatus.PENDING or not ticket.counted:
            return ticket
        now = standing(ticket.needed, parse_counted(ticket.counted), lambda who: self.eligible(ticket, who))
        return replace(ticket, standing=counted_text(now))

    @classmethod
    def from_thresholds(cls, threshold: Decimal, dual_above: Decimal,
                        members: Mapping[str, frozenset[str]] | None = None) -> Rules:
        """Today's two settings as a policy: one approver above the threshold, two above DUAL_APPROVAL_ABOVE."""
        if dual_above <= threshold:
            return cls((Tier(threshold, ((EVERYONE, 2),)),), members)
        return cls((Tier(threshold, ((EVERYONE, 1),)), Tier(dual_above, ((EVERYONE, 2),))), members)


# The settings' defaults as a policy: APPROVAL_THRESHOLD=100, DUAL_APPROVAL_ABOVE=5000, anyone but the requester.
DEFAULT_RULES = Rules.from_thresholds(Decimal(100), Decimal(5000))


def counted(need: Need, approvers: Mapping[str, frozenset[str]]) -> dict[str, str]:
    """The largest assignment of approvers (in order) to the need's places, one place each: {approver: group}."""
    places = [group for group, count in need for _ in range(count)]
    holder: dict[int, str] = {}

    def place(who: str, tried: set[int]) -> bool:
        for index, group in enumerate(places):
            if group in approvers[who] and index not in tried:
                tried.add(index)
                if index not in holder or place(holder[index], tried):
                    holder[index] = who
                    return True
        return False

    for who in approvers:
        place(who, set())
    group_of = {who: places[index] for index, who in holder.items()}
    return {who: group_of[who] for who in approvers if who in group_of}


def standing(need: Need, approvals: Mapping[str, str], eligible: Callable[[str], frozenset[str]]) -> dict[str, str]:
    """The approvals given ({approver: group}, in order) judged again with each approver's groups now: those that
    still count keep a place, the earliest first; one that counted for nothing, or now can take no place, gets ""."""
    still = {who: eligible(who) for who, group in approvals.items() if group}
    placed = counted(need, still)
    return {who: placed.get(who, "") for who in approvals}


@dataclass(frozen=True)
class Policy:
    """The rules and the numbers they apply; the desk fills them from the settings of the same names (desk.py)."""

    # Who approves what (APPROVAL_POLICY, or APPROVAL_THRESHOLD and DUAL_APPROVAL_ABOVE).
    rules: Rules = DEFAULT_RULES
    # The most one request may ask (MAX_REIMBURSEMENT).
    max_amount: Decimal = Decimal("1000000")
    # Paid without approval per requester and UTC day (DAILY_AUTO_APPROVAL_LIMIT).
    daily_auto_approval_limit: Decimal = Decimal("250")
    # How long a ticket waits for a decision (APPROVAL_TTL_HOURS).
    approval_ttl: timedelta = timedelta(hours=72)

    def in_words(self) -> str:
        """The policy in force as main.py and `make web` print it: APPROVAL_POLICY's file and its tiers, if set."""
        tiers = [f"above ${tier.above:,} {need_words(tier.need)}" for tier in self.rules.tiers]
        return (f"{self.rules.source} ({len(tiers)} tier{'s' * (len(tiers) > 1)}: {'; '.join(tiers)})"
                if self.rules.source != THRESHOLDS else
                f"up to ${self.rules.threshold:,} paid at once (once per purpose, "
                f"${self.daily_auto_approval_limit:,} a day); more needs an approver")


_LEADING_ARTICLES = re.compile(r"^(?:(?:the|a|an|my|our)\s+)+")


def purpose_key(purpose: str) -> str:
    """The purpose as the same-purpose rule compares it: "The  Laptop", "my laptop." and "laptop" are one."""
    words = " ".join(unicodedata.normalize("NFKC", purpose).casefold().split()).strip(" .!?,;:")
    return _LEADING_ARTICLES.sub("", words) or words
