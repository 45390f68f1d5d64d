"""The reimbursement policy, enforced in code rather than left to the prompt.

Amounts are handled as `Decimal` cents so that 0.1 + 0.2 style float error can
never decide whether a payout needs approval.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from ..settings import Settings
from . import inputs

_AMOUNT_TEXT = re.compile(r"-?\$?-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


class PolicyError(ValueError):
    """A request the policy refuses; the message tells the user what to do."""


def parse_amount(amount: object, settings: Settings) -> Decimal:
    """Return `amount` as a Decimal with two places, or raise PolicyError."""
    value = _exact_dollars(amount)
    if value <= 0:
        raise PolicyError(f"The amount must be more than zero; got {value}.")
    if value > settings.max_amount:
        raise PolicyError(
            f"The amount ${value:,} is above the ${settings.max_amount:,} limit for one "
            "reimbursement; split it or contact finance."
        )
    return value


def approved_cents(amount: object, asked_cents: int) -> int:
    """An approver's amount for a ticket, in cents: more than zero and at most what was asked.

    Raises InputError (field "amount"), the error every surface shows for a bad input.
    """
    asked = from_cents(asked_cents)
    try:
        value = _exact_dollars(amount)
    except PolicyError as error:
        raise inputs.InputError("amount", str(error)) from None
    if value <= 0:
        raise inputs.InputError("amount", f"The approved amount must be more than zero; got {value}. "
                                          "To pay nothing, reject the ticket.")
    if value > asked:
        raise inputs.InputError("amount", f"${value:,} is more than the ${asked:,} asked; an approver may "
                                          "approve the amount asked or less.")
    return to_cents(value)


def _exact_dollars(amount: object) -> Decimal:
    """`amount` as exact dollars and cents, or PolicyError saying how to write it."""
    if isinstance(amount, bool) or not isinstance(amount, (int, float, str, Decimal)):
        raise PolicyError(f"The amount must be a number of dollars, e.g. 250.00, not {amount!r}.")
    if isinstance(amount, float) and not math.isfinite(amount):
        raise PolicyError("The amount must be a finite number of dollars, e.g. 250.00.")
    if isinstance(amount, str):
        # Decimal() would also take "1e2", "1_000" and "Infinity": text must look like money.
        if not _AMOUNT_TEXT.fullmatch(amount.strip()):
            raise PolicyError(
                f"The amount {amount!r} is not a number of dollars and cents; "
                "write it in plain digits, e.g. 1,250.00."
            )
        amount = amount.strip().replace(",", "").replace("$", "")
    # str() of a float is its shortest form, so 100.009 stays 100.009 and is refused below.
    value = Decimal(str(amount))
    if not value.is_finite():
        raise PolicyError("The amount must be a finite number of dollars, e.g. 250.00.")
    cents = value.quantize(Decimal("0.01"))
    if cents != value:
        raise PolicyError(
            f"The amount {value} has fractions of a cent; give it in dollars and cents, "
            "with at most two decimals, e.g. 250.00."
        )
    return cents


def parse_purpose(purpose: object) -> str:
    """Return the purpose with spacing normalised, or raise PolicyError."""
    try:
        return inputs.purpose(purpose)
    except inputs.InputError as error:
        raise PolicyError(str(error)) from None


def parse_request(purpose: object, amount: object, settings: Settings) -> tuple[str, Decimal]:
    """The purpose and amount of a request, checked; raises PolicyError."""
    return parse_purpose(purpose), parse_amount(amount, settings)


def needs_approval(amount: Decimal, settings: Settings) -> bool:
    return amount > settings.approval_threshold


_LEADING_ARTICLES = re.compile(r"^(?:(?:the|a|an|my|our)\s+)+")


def purpose_key(purpose: str) -> str:
    """The purpose as the same-purpose rule compares it.

    Case, spacing, trailing punctuation and leading articles are ignored, so
    "The  Laptop", "my laptop." and "laptop" are one purpose; "laptop bag" is another.
    """
    words = " ".join(purpose.casefold().split()).strip(" .!?,;:")
    return _LEADING_ARTICLES.sub("", words) or words


def requester_of(user_id: str) -> str:
    """Who a payout counts against for the daily rules: the person behind the ADK user id.

    Ids are compared in their one canonical spelling (inputs.py), so `Alice`
    and `alice` share one daily allowance.
    """
    try:
        return inputs.name(user_id)
    except inputs.InputError:
        return user_id


def to_cents(amount: Decimal) -> int:
    return int(amount * 100)


def from_cents(cents: int) -> Decimal:
    return (Decimal(cents) / 100).quantize(Decimal("0.01"))
