"""The reimbursement policy, enforced in code rather than left to the prompt.

Amounts are `Decimal` or integer cents, so that a float's error can never decide whether a payout needs approval.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Protocol

from . import inputs
from .quorum import DEFAULT_RULES, Rules


@dataclass(frozen=True)
class Policy:
    """The numbers the rules apply; desk.py fills them from the settings of the same names."""

    # Who approves what (APPROVAL_POLICY, or APPROVAL_THRESHOLD and DUAL_APPROVAL_ABOVE): quorum.Rules.
    rules: Rules = DEFAULT_RULES
    # The most one request may ask (MAX_REIMBURSEMENT).
    max_amount: Decimal = Decimal("1000000")
    # Paid without approval per requester and UTC day (DAILY_AUTO_APPROVAL_LIMIT).
    daily_auto_approval_limit: Decimal = Decimal("250")
    # How long a ticket waits for a decision (APPROVAL_TTL_HOURS).
    approval_ttl: timedelta = timedelta(hours=72)

    @property
    def approval_threshold(self) -> Decimal:
        """Up to this, paid at once under the daily rules; above it, the policy's lowest tier decides."""
        return self.rules.threshold


class Limits(Protocol):
    """Anything that names the maximum of one request: a Policy, or the settings themselves."""

    @property
    def max_amount(self) -> Decimal: ...


def parse_amount(amount: object, settings: Limits) -> Decimal:
    """`amount` under the one amount rule (inputs.amount), at most MAX_REIMBURSEMENT; raises AmountError."""
    return inputs.amount(amount, most=settings.max_amount)


def approved_cents(amount: object, asked_cents: int) -> int:
    """An approver's amount in cents under the one amount rule, at most what was asked; raises AmountError."""
    asked = from_cents(asked_cents)
    try:
        return to_cents(inputs.amount(amount, most=asked))
    except inputs.AmountError as error:
        got = f"; got {error.shown.lstrip('$')}" if error.shown else ""
        message = str(error)
        if error.problem == inputs.NOT_POSITIVE:
            message = f"The approved amount must be more than zero{got}. To pay nothing, reject the ticket."
        if error.problem == inputs.ABOVE_MAXIMUM:
            message = (f"{error.shown or 'That amount'} is more than the ${asked:,} asked; an approver may "
                       "approve the amount asked or less.")
        raise inputs.AmountError(error.problem, message, shown=error.shown, most=asked, approving=True) from None


def parse_purpose(purpose: object) -> str:
    """Return the purpose with spacing normalised, or raise InputError."""
    return inputs.purpose(purpose)


def parse_request(purpose: object, amount: object, settings: Limits) -> tuple[str, Decimal]:
    """The purpose and amount of a request, checked; raises InputError."""
    return parse_purpose(purpose), parse_amount(amount, settings)


def needs_approval(amount: Decimal, policy: Policy) -> bool:
    return amount > policy.approval_threshold


_LEADING_ARTICLES = re.compile(r"^(?:(?:the|a|an|my|our)\s+)+")


def purpose_key(purpose: str) -> str:
    """The purpose as the same-purpose rule compares it: "The  Laptop", "my laptop." and "laptop" are one."""
    words = " ".join(unicodedata.normalize("NFKC", purpose).casefold().split()).strip(" .!?,;:")
    return _LEADING_ARTICLES.sub("", words) or words


def requester_of(user_id: str) -> str:
    """Who a payout counts against for the daily rules: the user id's canonical spelling (`Alice` is alice)."""
    try:
        return inputs.name(user_id)
    except inputs.InputError:
        return user_id


def to_cents(amount: Decimal) -> int:
    return int(amount * 100)


def from_cents(cents: int) -> Decimal:
    return (Decimal(cents) / 100).quantize(Decimal("0.01"))
