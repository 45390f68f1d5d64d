"""A tier's need, approvals from groups (`finance=1,cfo=1`), and who counted for which: as a ticket stores them and
as people read them. Whether an approval counts is the policy's to say (policy/rules.py, policy/approving.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# The group every approver is in: the policy built from APPROVAL_THRESHOLD and DUAL_APPROVAL_ABOVE needs it.
EVERYONE = "approvers"

Need = tuple[tuple[str, int], ...]  # (group, approvals) in the policy's order


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
