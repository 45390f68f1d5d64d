"""The approval policy as docs/policy.md states it, written again as a small model to hold the ledger against.

It imports nothing from the package. What it covers, each rule as the docs say it:
- the tier: the highest whose line the requester's total that UTC day is above, the total being what they asked
  for that day and may still be paid, this request included;
- who may decide: a configured approver eligible for the ticket, eligible meaning in a group of its need when the
  decision is judged, and for the requester only a group that allows self-approval;
- each approval counts once, for one group: at each approval the approvals given so far are matched again to the
  need's places, earliest first, each approver where they are eligible now; one that no longer fits stays out
  once another approval is accepted; the new approval is accepted only if it adds a place;
- the ticket is approved when every place is taken; the first eligible rejection rejects it; a decided ticket takes
  no more decisions.
Left out: payouts, amounts approved, expiry, and the same-message totals (tests/support/invariants.py has those).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Policy:
    tiers: tuple[tuple[int, dict[str, int]], ...]  # (above this many cents, {group: approvals}), lowest first
    self_approval: frozenset[str]  # groups whose members may approve their own request


@dataclass
class Request:
    requester: str
    day: int
    cents: int
    tier: int  # numbered from 1
    need: dict[str, int]
    status: str = "pending"
    approvals: dict[str, bool] = field(default_factory=dict)  # approver -> counts, in the order given


def fill(need: dict[str, int], groups: list[frozenset[str]]) -> bool:
    """Whether these approvers can each take a place of their own in the need, in one of their groups."""
    if not groups:
        return True
    first, rest = groups[0], groups[1:]
    return any(fill({**need, group: need[group] - 1}, rest) for group in first if need.get(group, 0) > 0)


class Model:
    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.requests: dict[str, Request] = {}

    def request(self, ticket: str, requester: str, day: int, cents: int) -> Request:
        total = cents + sum(r.cents for r in self.requests.values()
                            if (r.requester, r.day) == (requester, day) and r.status in ("pending", "approved"))
        tier = max([n for n, (above, _) in enumerate(self.policy.tiers, 1) if total > above], default=1)
        self.requests[ticket] = Request(requester, day, cents, tier, self.policy.tiers[tier - 1][1])
        return self.requests[ticket]

    def eligible(self, request: Request, who: str, members: dict[str, frozenset[str]]) -> frozenset[str]:
        groups = members.get(who, frozenset()) & set(request.need)
        return groups & self.policy.self_approval if who == request.requester else groups

    def counting(self, request: Request, members: dict[str, frozenset[str]]) -> list[str]:
        """The approvals that count now: earliest first, each kept if it still fits beside those kept before it."""
        kept: list[str] = []
        for who, counts in request.approvals.items():
            if counts and fill(request.need, [self.eligible(request, w, members) for w in [*kept, who]]):
                kept.append(who)
        return kept

    def decide(self, ticket: str, who: str, approve: bool, members: dict[str, frozenset[str]]) -> bool:
        """Whether the decision is accepted, the request moved as it says if so."""
        request = self.requests[ticket]
        if request.status != "pending" or who not in members or not self.eligible(request, who, members):
            return False
        if not approve:
            request.status = "rejected"
            return True
        kept = self.counting(request, members)
        if who in request.approvals or not fill(request.need, [self.eligible(request, w, members)
                                                                for w in [*kept, who]]):
            return False
        request.approvals = {w: w in kept for w in request.approvals} | {who: True}
        if len(kept) + 1 == sum(request.need.values()):
            request.status = "approved"
        return True
