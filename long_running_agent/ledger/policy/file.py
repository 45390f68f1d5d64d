"""The approval policy from a TOML file (APPROVAL_POLICY), checked against the approvers before anything runs.

    [[tier]]
    above = 100                  # dollars: the requester's total above this needs...
    need = { finance = 1 }       # ...approvals from these groups (APPROVERS: bob:TOKEN:finance)
    [group.cfo]
    allow_self_approval = true   # a cfo may approve their own request (counting for cfo)

Each problem is one line naming the field (docs/policy.md). The desk reads it once, at start (desk.py).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from ..need import EVERYONE
from .rules import Rules, Tier, counted


def load(path: Path, members: Mapping[str, frozenset[str]] | None) -> Rules:
    """The policy in `path`, every tier checked against who is in which group; raises ValueError naming the field."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"cannot read {path} ({error.strerror}); point APPROVAL_POLICY at a TOML file.") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not TOML: {error}.") from None
    unknown = sorted(set(data) - {"tier", "group"})
    if unknown:
        raise ValueError(f"{unknown[0]}: unknown key in {path}; a policy has [[tier]] and [group.NAME] tables.")
    tiers = data.get("tier")
    if not isinstance(tiers, list) or not tiers:
        raise ValueError(f"tier: {path} has no [[tier]]; add one, e.g. [[tier]] above = 100, need = {{ finance = 1 }}.")
    rules = Rules(tuple(_tier(number, tier) for number, tier in enumerate(tiers, 1)), members,
                  _self_approval(data.get("group", {})), source=str(path))
    check(rules)
    return rules


def check(rules: Rules) -> None:
    """Tiers in order, groups that exist, and needs the configured approvers can meet; raises ValueError."""
    known = {EVERYONE} | ({g for groups in rules.members.values() for g in groups} if rules.members else set())
    strangers = sorted(rules.self_approval - known)
    if strangers:
        raise ValueError(f"group.{strangers[0]}: no approver is in group {strangers[0]}; name it in APPROVERS "
                         f"(NAME:TOKEN:{strangers[0]}).")
    for number, tier in enumerate(rules.tiers, 1):
        if number > 1 and tier.above <= rules.tiers[number - 2].above:
            raise ValueError(f"tier[{number}].above = {tier.above} is not above tier[{number - 1}].above = "
                             f"{rules.tiers[number - 2].above}; list the tiers from the lowest amount up.")
        for group in (group for group, _ in tier.need if group not in known):
            raise ValueError(f"tier[{number}].need.{group}: no approver is in group {group}; name it in APPROVERS "
                             f"(NAME:TOKEN:{group}) or use a group that exists: {', '.join(sorted(known))}.")
        if rules.members is None:
            continue
        able = counted(tier.need, rules.members)
        if len(able) < tier.size:
            lacking = next(g for g, n in tier.need if list(able.values()).count(g) < n)
            names = sorted(n for n, groups in rules.members.items() if lacking in groups)
            raise ValueError(
                f"tier[{number}].need.{lacking}: no configured approvers can meet it (it needs {tier.size} different "
                f"approvers; in {lacking}: {', '.join(names) or 'nobody'}); add approvers to APPROVERS or lower it.")


def _tier(number: int, raw: Any) -> Tier:
    where = f"tier[{number}]"
    if not isinstance(raw, dict) or set(raw) - {"above", "need"}:
        raise ValueError(f"{where}: a tier has `above` (dollars) and `need` ({{ group = approvals }}) only.")
    try:
        above = Decimal(str(raw.get("above")))
    except InvalidOperation:
        above = Decimal(-1)
    if isinstance(raw.get("above"), bool) or not above.is_finite() or above <= 0:
        raise ValueError(f"{where}.above = {raw.get('above')!r} must be a number of dollars above 0, e.g. 100.")
    need = raw.get("need")
    if not isinstance(need, dict) or not need:
        raise ValueError(f"{where}.need must name groups and how many approvals each, e.g. {{ finance = 1 }}.")
    for group, count in need.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"{where}.need.{group} = {count!r} must be a whole number of approvals, 1 or more.")
    return Tier(above, tuple(need.items()))


def _self_approval(groups: Any) -> frozenset[str]:
    if not isinstance(groups, dict):
        raise ValueError("group: must be tables, e.g. [group.cfo] allow_self_approval = true.")
    allowed = set()
    for name, options in groups.items():
        if not isinstance(options, dict) or set(options) - {"allow_self_approval"}:
            raise ValueError(f"group.{name}: a group's only option is allow_self_approval = true or false.")
        if not isinstance(options.get("allow_self_approval", False), bool):
            raise ValueError(f"group.{name}.allow_self_approval must be true or false.")
        if options.get("allow_self_approval"):
            allowed.add(name)
    return frozenset(allowed)
