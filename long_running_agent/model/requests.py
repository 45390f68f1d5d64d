"""How the offline model reads a chat message: the expenses in it, each an amount (`amounts.py`) and a purpose.

Several expenses ("$250 for lunch and $45 for a taxi", "Taxi $45, hotel $300") are cut into one part per
amount; a message that cannot be cut so that every part holds one amount and its purpose gets a question
back, never a ticket for something the user did not write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from .amounts import Money, find_amount, find_money

_ARTICLE = r"(?:the\s+|a\s+|an\s+|my\s+|our\s+)?"
_PURPOSES = [
    re.compile(rf"\b(?:for|on)\s+{_ARTICLE}(?P<p>.+)", re.IGNORECASE),
    re.compile(rf"\b(?:reimburse|refund|expense)\s+(?:me\s+)?{_ARTICLE}(?P<p>.+)", re.IGNORECASE),
]
# Where one expense ends and the next begins, between two amounts.
_BETWEEN = re.compile(r"\s*(?:[;\n]|,)\s*(?:and\s+|plus\s+|also\s+)?|\s+(?:and|plus)\s+(?:also\s+)?", re.I)
# "$250 for ...": the amount comes first and its purpose follows.
_PURPOSE_AFTER = re.compile(r"\s*(?:for|on)\b", re.I)
# Words that start a request rather than name what it was for.
_LEAD_IN = re.compile(
    r"^(?:(?:please|pls|hi|hello|and|also|plus|then|i|we|spent|paid|reimburse|refund|expense|me|us|"
    r"can\s+you|could\s+you|the|a|an|my|our|for)\b[\s,:-]*|[\s,:;-]+)+", re.I,
)
# A "purpose" of only these words says nothing ("Reimburse $250 for "): it is asked for instead.
_FILLER = re.compile(
    r"(?:(?:for|on|to|of|in|at|with|and|the|a|an|my|our|me|us|it|this|that|please|pls|thanks|thank\s+you)"
    r"\b[\W_]*)+", re.I,
)
_COURTESY = re.compile(r"\s*\b(please|thanks|thank you)\b.*$", re.I)
_SEVERAL = ("I see several amounts ({amounts}). Please write each expense as an amount and what it was "
            "for, separated by 'and', e.g. 'Reimburse $250 for the team lunch and $480 for the conference ticket'.")


@dataclass(frozen=True)
class Expense:
    amount: Decimal
    purpose: str


def find_purpose(text: str, amount_span: tuple[int, int] | None) -> str | None:
    """What the expense in `text` was for: the words after "for", "on" or "reimburse"."""
    if amount_span:
        text = text[: amount_span[0]] + " " + text[amount_span[1]:]
    # One line, so a purpose written across a line break is read whole.
    text = " ".join(text.split())
    for pattern in _PURPOSES:
        if match := pattern.search(text):
            purpose = _tidy(match.group("p"))
            if purpose and not _FILLER.fullmatch(purpose):
                return purpose
    return None


def _tidy(purpose: str) -> str:
    return " ".join(_COURTESY.sub("", purpose).strip(" .!?,;:").split())


def find_expenses(text: str) -> list[Expense] | str | None:
    """Every expense in a message naming two or more dollar amounts; a question if unclear; None otherwise."""
    money = find_money(text)
    if len(money) < 2 or any(m.currency != "USD" or m.value is None for m in money):
        return None
    unclear = _SEVERAL.format(amounts=", ".join(m.text for m in money))
    cut = _cut(text, money)
    if cut is None:
        return unclear
    parts, purpose_first = cut
    expenses = []
    for part in parts:
        found = find_amount(part)
        if not isinstance(found, tuple):
            return found or unclear
        purpose = _bare_purpose(part, found[1]) if purpose_first else find_purpose(part, found[1])
        if not purpose:
            return unclear
        expenses.append(Expense(found[0], purpose))
    return expenses


def _cut(text: str, money: list[Money]) -> tuple[list[str], bool] | None:
    """`text` in one part per amount, and whether purposes come first; None when they cannot be told apart."""
    # "$250 for lunch and $45 for a taxi": a part ends at the last separator before the next amount.
    # "Lunch $250, taxi $45": each purpose comes first, so a part ends at the first one.
    after = [bool(_PURPOSE_AFTER.match(text, m.span[1])) for m in money]
    if any(after) and not all(after):
        return None
    pick = -1 if all(after) else 0
    cuts = [0]
    for left, right in zip(money, money[1:], strict=False):
        separators = list(_BETWEEN.finditer(text, left.span[1], right.span[0]))
        if not separators:
            return None
        chosen = separators[pick]
        cuts += [chosen.start(), chosen.end()]
    cuts.append(len(text))
    return [text[cuts[i]:cuts[i + 1]] for i in range(0, len(cuts), 2)], pick == 0


def _bare_purpose(part: str, span: tuple[int, int]) -> str | None:
    """The purpose of "Taxi $45" or "hotel: $300": the words left beside the amount, if few."""
    words = _tidy(_LEAD_IN.sub("", (part[: span[0]] + " " + part[span[1]:]).strip()))
    return words if words and len(words.split()) <= 8 and re.search(r"[^\W\d_]", words) else None
