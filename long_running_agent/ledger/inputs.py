"""One rule per input, on every surface: the chat, the CLI and the API, on SQLite and PostgreSQL.

Names, purposes and amounts are refused rather than guessed at (docs/security.md: identities, one rule per input).
The limits are what the database columns hold, so no input reaches the database only to be cut short there. Amounts
are exact dollars (`Decimal`), kept as integer cents: a float's error never decides what is paid.
"""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal

from ..refusals.rules import NotAnApprover
from ..refusals.values import AmountError, InputError

__all__ = ["AmountError", "InputError", "amount", "approved_cents", "approver", "exact_amount", "from_cents",
           "is_canonical_name", "name", "printable", "purpose", "reason", "requester_of", "to_cents", "unstorable"]

MAX_NAME = 64
# Session ids, app names and call ids: ADK's session tables hold 128 characters.
MAX_ID = 128
MAX_REASON = 500
MAX_PURPOSE = 300
# A chat message longer than this is not stored: an expense request fits in a few lines.
MAX_MESSAGE = 4_000

_NAME = re.compile(r"[a-z0-9](?:[a-z0-9._@+-]*[a-z0-9])?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]")


# AmountError.problem.
NOT_A_NUMBER = "not_a_number"
NOT_POSITIVE = "not_positive"
ABOVE_MAXIMUM = "above_maximum"
FRACTION_OF_A_CENT = "fraction_of_a_cent"


def name(raw: object, field: str = "name") -> str:
    """The canonical form of a user id or an approver name."""
    if not isinstance(raw, str) or not raw.strip():
        raise InputError(field, f"Give a {field}, e.g. alice.")
    canonical = unicodedata.normalize("NFKC", raw).strip().casefold()
    if len(canonical) > MAX_NAME:
        raise InputError(field, f"A {field} has at most {MAX_NAME} characters; got {len(canonical)}.")
    if not _NAME.fullmatch(canonical):
        raise InputError(
            field,
            f"{printable(raw)!r} is not a usable {field}: use letters a-z, digits and . _ @ + -, "
            "starting and ending with a letter or digit, e.g. alice or bob.smith@example.com.",
        )
    return canonical


def approver(raw: object, approvers: frozenset[str] | None) -> str:
    """`raw` as a canonical name that may decide: one of `approvers` (APPROVERS), when they are set."""
    canonical = name(raw, "approver name")
    if approvers is not None and canonical not in approvers:
        raise NotAnApprover(canonical, sorted(approvers))
    return canonical


def is_canonical_name(raw: str) -> bool:
    try:
        return name(raw) == raw
    except InputError:
        return False


def requester_of(user_id: str) -> str:
    """Who a request or payout counts against: the user id's canonical spelling (`Alice` is alice)."""
    try:
        return name(user_id)
    except InputError:
        return user_id


def reason(raw: object, *, required: bool, needed_by: str = "A rejection") -> str | None:
    """A decision's reason: one line of text, at most MAX_REASON characters."""
    text = " ".join(raw.split()) if isinstance(raw, str) else ""
    if raw is not None and not isinstance(raw, str):
        raise InputError("reason", "The reason must be text.")
    if not text:
        if required:
            raise InputError("reason", f"{needed_by} needs a reason; the requester is told it.", missing=True)
        return None
    if _CONTROL.search(text):
        raise InputError("reason", "The reason contains control or invisible characters; write plain text.")
    if len(text) > MAX_REASON:
        raise InputError("reason", f"Keep the reason under {MAX_REASON} characters; it has {len(text)}.")
    return text


def purpose(raw: object) -> str:
    """What an expense was for: one line in NFKC, with nothing invisible and no letters that pass for another script's.

    Purposes are shown to approvers and compared by the same-purpose rule, so what cannot be seen, or looks like
    what it is not, is refused and named (docs/security.md: one rule per input).
    """
    if not isinstance(raw, str) or not raw.strip():
        raise InputError("purpose", "Say what the expense was for, e.g. 'team lunch'.")
    if (hidden := _invisible(raw)) is not None:
        raise InputError("purpose", f"The purpose has an invisible character, {hidden}; type it again without it.")
    text = " ".join(unicodedata.normalize("NFKC", raw).split())
    if len(text) > MAX_PURPOSE:
        raise InputError("purpose", f"Keep the purpose under {MAX_PURPOSE} characters.")
    if not text.isascii() and (look_alike := _look_alike(text)) is not None:
        raise InputError("purpose", f"The purpose mixes {look_alike}; type it again in one alphabet.")
    return text


# Invisible, whatever Unicode calls them: variation selectors (Mn), fillers (Lo, So) and joiners beyond Cf and Cc.
_HIDDEN = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2800\u3164\ufe00-\ufe0f\uffa0"
                     "\U000e0100-\U000e01ef]")


def _invisible(text: str) -> str | None:
    """The first character of `text` nobody sees (a format or control character, a variation selector, a filler)."""
    for at, char in enumerate(text, start=1):
        if char not in " \t\n\r" and (unicodedata.category(char) in ("Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp")
                                       or _HIDDEN.match(char)):
            return f"U+{ord(char):04X} {unicodedata.name(char, '(a control character)')}, at character {at}"
    return None


def _look_alike(text: str) -> str | None:
    """The scripts `text` mixes and a letter that passes for another, if it mixes scripts with look-alike letters.

    Unicode's confusables table (confusable_homoglyphs, imported only for text that is not ASCII) decides.
    """
    from confusable_homoglyphs import categories, confusables

    if not confusables.is_dangerous(text):
        return None
    letters = [categories.alias(char) for char in text if char.isalpha()]
    most = max(set(letters), key=letters.count)
    found = confusables.is_confusable(text, preferred_aliases=[most.lower()]) or confusables.is_confusable(text)
    assert found  # what is_dangerous said
    scripts = " and ".join(sorted(a.title() for a in categories.unique_aliases(text) - {"COMMON", "INHERITED"}))
    char, like = found[0]["character"], found[0]["homoglyphs"][0]["c"]
    return f"{scripts} letters that look alike ({char!r} passes for {like!r})"


_CENT = Decimal("0.01")
# One sign, before or after the dollar sign; thousands grouped by commas or not at all. ASCII
# digits only: Python's \d and Decimal() also read "١٢٣" or "０４０００", which nobody checks by eye.
_AMOUNT_TEXT = re.compile(r"(?:-\$?|\$-?)?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?")
# Larger numbers are refused without being repeated back: a 40-digit figure helps no one.
_SHOWN_BELOW = Decimal(10) ** 15


def amount(raw: object, *, most: Decimal) -> Decimal:
    """`raw` (a number, or text such as "1,250.50" or "$200") as exact dollars: more than zero, at most `most`.

    Never rounds (100.009 is refused); the maximum is checked before any arithmetic. Raises AmountError.
    """
    value = _exact(raw, most)
    shown = _shown(value)
    if value <= 0:
        got = f"; got {shown.lstrip('$')}" if shown else ""
        raise AmountError(NOT_POSITIVE, f"The amount must be more than zero{got}.", shown=shown, most=most)
    if value > most:
        named = f"The amount {shown}" if shown else "The amount"
        raise AmountError(ABOVE_MAXIMUM, f"{named} is above the ${most:,} limit for one reimbursement; contact "
                                         "finance for more.", shown=shown, most=most)
    cents = value.quantize(_CENT)  # exact arithmetic from here: the value is at most `most`
    if cents != value:
        raise AmountError(FRACTION_OF_A_CENT, f"The amount {value} has fractions of a cent; give it in dollars "
                                              "and cents, with at most two decimals, e.g. 250.00.",
                          shown=shown, most=most)
    return cents


def approved_cents(raw: object, asked_cents: int) -> int:
    """An approver's amount in cents under the one amount rule, at most what was asked; raises AmountError."""
    asked = from_cents(asked_cents)
    try:
        return to_cents(amount(raw, most=asked))
    except AmountError as error:
        got = f"; got {error.shown.lstrip('$')}" if error.shown else ""
        message = str(error)
        if error.problem == NOT_POSITIVE:
            message = f"The approved amount must be more than zero{got}. To pay nothing, reject the ticket."
        if error.problem == ABOVE_MAXIMUM:
            message = (f"{error.shown or 'That amount'} is more than the ${asked:,} asked; an approver may "
                       "approve the amount asked or less.")
        raise AmountError(error.problem, message, shown=error.shown, most=asked, approving=True) from None


def to_cents(dollars: Decimal) -> int:
    return int(dollars * 100)


def from_cents(cents: int) -> Decimal:
    return (Decimal(cents) / 100).quantize(_CENT)


def exact_amount(raw: object) -> Decimal:
    """The exact number `raw` is, read as `amount` reads it, but with no bounds checked; raises AmountError.

    For wording an amount another part has accepted (the offline model telling what was approved): read
    any other way, a spelling `amount` takes, such as "$200", could be unreadable there.
    """
    return _exact(raw, most=Decimal("Infinity"))


def _exact(raw: object, most: Decimal) -> Decimal:
    """The exact, finite number `raw` is, or AmountError saying how to write an amount."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str, Decimal)):
        raise AmountError(NOT_A_NUMBER, f"The amount must be a number of dollars, e.g. 250.00, not "
                                        f"{_clipped(repr(raw))}.", shown=None, most=most)
    if isinstance(raw, int):
        return Decimal(raw)  # not through str(): Python refuses to print an integer of over 4,300 digits
    if isinstance(raw, str):
        text = raw.strip()
        # Decimal() would also take "1e2", "1_000", "--5" and "Infinity": text must look like money.
        if not _AMOUNT_TEXT.fullmatch(text):
            raise AmountError(NOT_A_NUMBER, f"The amount {_clipped(raw)!r} is not a number of dollars and cents; "
                                            "write it in plain digits, e.g. 1,250.00.", shown=None, most=most)
        raw = text.replace(",", "").replace("$", "")
    # str() of a float is its shortest form, so 100.009 stays 100.009 and is refused as such.
    value = raw if isinstance(raw, Decimal) else Decimal(str(raw))
    if not value.is_finite():
        raise AmountError(NOT_A_NUMBER, "The amount must be a finite number of dollars, e.g. 250.00.",
                          shown=None, most=most)
    return value


def _shown(value: Decimal) -> str | None:
    """"$1,250.50" (with its cents, or every decimal it has); None for a figure too large to repeat."""
    if value.copy_abs() >= _SHOWN_BELOW:  # copy_abs: no rounding, so no overflow on any length
        return None
    cents = value.quantize(_CENT)
    return f"${cents if cents == value else value:,}"


def _clipped(text: str) -> str:
    return printable(text if len(text) <= 40 else text[:40] + "...")


# What no database column here stores as text: NUL (PostgreSQL refuses it) and
# half of a surrogate pair (JSON's "\ud800" escape), which is not Unicode at all.
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")


def unstorable(data: object, where: str = "body") -> str | None:
    """Where in `data` (JSON: text, lists, objects, keys too) a text has NUL or half a character, or None."""
    if isinstance(data, str):
        return where if _UNSTORABLE.search(data) else None
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, str) and _UNSTORABLE.search(key):
                return f"{where} (a key)"
            if found := unstorable(value, f"{where}.{key}"):
                return found
    if isinstance(data, list):
        for index, item in enumerate(data):
            if found := unstorable(item, f"{where}[{index}]"):
                return found
    return None


_UNPRINTABLE = re.compile(_CONTROL.pattern.replace("\\x00-\\x1f", "\\x00-\\x09\\x0b-\\x1f"))


def printable(text: str) -> str:
    """`text` safe for a terminal: control characters (but line breaks) shown as escapes, never obeyed."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
