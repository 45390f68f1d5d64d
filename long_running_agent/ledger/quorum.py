"""Who must approve what: the approval policy's tiers, approver groups, and whether an approval counts.

A tier needs approvals from groups (`finance = 2`, or `finance = 1, cfo = 1`). Each approver counts once, for one
group: `counted` finds the assignment that counts the most of them (a matching), so someone in two groups counts
where they are needed. The ledger stores the assignment on the ticket ("bob=finance"), and an approval that does not
make it grow is refused; when it covers the whole need the ticket is approved (docs/policy.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import NamedTuple

# The group every approver is in: the policy built from APPROVAL_THRESHOLD and DUAL_APPROVAL_ABOVE needs it.
EVERYONE = "approvers"

Need = tuple[tuple[str, int], ...]  # (group, approvals) in the policy's order


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
    source: str = "APPROVAL_THRESHOLD and DUAL_APPROVAL_ABOVE"
    version: str = field(init=False)

    def __post_init__(self) -> None:
        # What a ticket records it was opened under: the tiers and the groups' options, not who is in them.
        shape = {"tiers": [[str(t.above), list(t.need)] for t in self.tiers], "self": sorted(self.self_approval)}
        digest = hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()
        object.__setattr__(self, "version", digest[:12])

    @property
    def threshold(self) -> Decimal:
        """At or below the lowest tier, the daily rules pay at once."""
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

    def eligible(self, approver: str, need: Need, *, requester: bool) -> frozenset[str]:
        """The groups of `need` an approval by `approver` may count for: their own, and for the requester only
        those that allow self-approval."""
        groups = self.groups_of(approver) & {group for group, _ in need}
        return groups & self.self_approval if requester else groups

    @classmethod
    def from_thresholds(cls, threshold: Decimal, dual_above: Decimal,
                        members: Mapping[str, frozenset[str]] | None = None) -> Rules:
        """Today's two settings as a policy: one approver above the threshold, two above DUAL_APPROVAL_ABOVE."""
        if dual_above <= threshold:
            return cls((Tier(threshold, ((EVERYONE, 2),)),), members)
        return cls((Tier(threshold, ((EVERYONE, 1),)), Tier(dual_above, ((EVERYONE, 2),))), members)


# The settings' defaults as a policy: APPROVAL_THRESHOLD=100, DUAL_APPROVAL_ABOVE=5000, anyone but the requester.
DEFAULT_RULES = Rules.from_thresholds(Decimal(100), Decimal(5000))


def need_text(need: Need) -> str:
    """How a ticket stores its need: "finance=1,cfo=1"."""
    return ",".join(f"{group}={count}" for group, count in need)


def parse_need(text: str) -> Need:
    return tuple((group, int(count)) for group, _, count in (part.partition("=") for part in text.split(",") if part))


def parse_counted(text: str | None) -> dict[str, str]:
    """How a ticket stores who counted for which group: "bob=finance\ncarol=cfo" as {approver: group}."""
    return dict(line.partition("=")[::2] for line in (text or "").splitlines() if line)


def counted_text(counted: Mapping[str, str]) -> str | None:
    return "\n".join(f"{who}={group}" for who, group in counted.items()) or None


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


def missing(need: Need, so_far: Mapping[str, str]) -> dict[str, int]:
    """What the need still lacks, by group, given who counted for which group."""
    given = list(so_far.values())
    return {group: count - given.count(group) for group, count in need if count > given.count(group)}


def need_words(need: Need) -> str:
    """"2 approvers", or "1 from finance and 1 from cfo"."""
    if len(need) == 1 and need[0][0] == EVERYONE:
        return f"{need[0][1]} approver" + ("s" if need[0][1] > 1 else "")
    return " and ".join(f"{count} from {group}" for group, count in need)


def progress_text(need: Need, so_far: Mapping[str, str], no_longer: Iterable[str] = ()) -> str:
    """"1 of 2: needs 1 more from cfo", or "2 of 2"; and whose approval no longer counts."""
    total, lacking = sum(count for _, count in need), missing(need, so_far)
    text = f"{len(so_far)} of {total}"
    if lacking:
        text += ": needs " + " and ".join(f"{count} more approver" + ("s" if count > 1 else "") if group == EVERYONE
                                          else f"{count} more from {group}" for group, count in lacking.items())
    if gone := list(no_longer):
        text += (f" ({' and '.join(gone)} approved, but " + ("no longer counts: not" if len(gone) == 1
                 else "no longer count: not") + " in a group it needs now)")
    return text


def counted_words(so_far: Mapping[str, str]) -> str:
    """"bob and carol", or "bob for finance and carol for cfo": who approved, each with the group they counted for."""
    return " and ".join(who if group == EVERYONE else f"{who} for {group}" for who, group in so_far.items())
