"""`expenses policy`: the approval policy in effect, and with --amount, the tier a request meets and who may approve it.

    .venv/bin/expenses policy
    .venv/bin/expenses policy --amount 12000 --requester alice

Names only: APPROVERS's tokens are never printed. The requester's total is read from the totals the ledger chooses
tiers by (ledger/policy/request_totals.py), so the answer is the tier a request made now would get.
"""

from __future__ import annotations

import argparse
from datetime import UTC
from decimal import Decimal

from ..desk import Desk
from ..ledger import inputs
from ..ledger.inputs import from_cents, to_cents
from ..ledger.need import EVERYONE, need_words
from ..ledger.policy import request_totals
from ..ledger.policy.rules import Policy, Rules
from ..names import EXPENSES
from ..refusals.values import InputError
from ..transcript import Transcript


def _dollars(amount: Decimal) -> str:
    return f"${amount:,.2f}"


def rules_text(policy: Policy) -> list[str]:
    """The policy's lines: where it comes from, its tiers, its groups and who may approve their own request."""
    rules = policy.rules
    lines = [f"Approval policy: {rules.source} (version {rules.version})",
             f"Up to {_dollars(rules.threshold)} a request is paid at once within the daily rules "
             f"({_dollars(policy.daily_auto_approval_limit)} a day, once per purpose); above it, a tier decides.",
             "The tier is chosen by the requester's total that UTC day, the request included:"]
    lines += [f"  tier {n}  above {_dollars(tier.above):<14} needs {need_words(tier.need)}"
              for n, tier in enumerate(rules.tiers, 1)]
    if rules.members is None:
        lines.append("Groups: APPROVERS is unset, so anyone but the requester approves, in the group "
                     f"{EVERYONE}.")
    else:
        lines.append("Groups (APPROVERS):")
        groups = sorted({g for groups in rules.members.values() for g in groups} | {EVERYONE})
        width = max(map(len, groups))
        lines += [f"  {group:<{width}}  {', '.join(members(rules, group)) or 'nobody'}"
                  + (" (everyone in APPROVERS)" if group == EVERYONE else "") for group in groups]
    allowed = ", ".join(sorted(rules.self_approval))
    lines.append(f"Self-approval: {allowed} (a member may approve their own request, counting for that group)"
                 if allowed
                 else "Self-approval: none (nobody approves their own request)")
    return lines


def members(rules: Rules, group: str, *, besides: str | None = None) -> list[str]:
    """Who is in `group`, the requester (`besides`) left out unless the group may approve its own requests."""
    named = sorted(name for name, groups in (rules.members or {}).items() if group in groups)
    return [n for n in named if n != besides or group in rules.self_approval]


async def tier_text(desk: Desk, amount_text: str, requester: str | None) -> list[str]:
    """Which tier a request of `amount_text` by `requester` would get now, why, and who could approve it."""
    policy = desk.policy
    amount = to_cents(inputs.amount(amount_text, most=policy.max_amount))
    today = 0
    if requester is not None:
        ledger = desk.ledger
        async with await ledger.database.session() as db:
            today = await request_totals.total_of(db, requester, ledger.now().astimezone(UTC).date())
    total = amount + today
    asked = _dollars(from_cents(amount))
    lines = [f"{asked} from {requester}, with {_dollars(from_cents(today))} asked for or paid today: "
             f"{_dollars(from_cents(total))} in all." if requester else
             f"{asked} alone (--requester NAME adds what they asked for or were paid today)."]
    rules = policy.rules
    if amount <= to_cents(rules.threshold):
        lines.append(f"{asked} is at most {_dollars(rules.threshold)}: paid at once within the daily rules; "
                     "past them, the tier below decides.")
    number, tier = rules.tier_for(total)
    lines.append(f"Tier {number} (above {_dollars(tier.above)}): it needs {need_words(tier.need)}.")
    if rules.members is None:
        lines.append("Who may approve: anyone" + (f" but {requester}." if requester else " but the requester."))
    else:
        who = "; ".join(f"{group}: {', '.join(members(rules, group, besides=requester)) or 'nobody'}"
                        for group, _ in tier.need)
        lines.append(f"Who may approve: {who}.")
    return lines


async def show(desk: Desk, args: argparse.Namespace, out: Transcript) -> int:
    if args.requester is not None and args.amount is None:
        raise InputError("amount", "--requester goes with --amount: the tier depends on the amount asked.",
                         next_step=f"Add --amount, e.g. {EXPENSES} policy --amount 12000 --requester alice.")
    lines = rules_text(desk.policy)
    if args.amount is not None:
        requester = inputs.name(args.requester, "requester") if args.requester is not None else None
        lines += ["", *await tier_text(desk, args.amount, requester)]
    print("\n".join(lines))
    return 0
