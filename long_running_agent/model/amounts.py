"""How the offline model reads the amount of money in a chat message.

One rule: exactly one amount, in US dollars, readable for sure ("$250", "USD 1,250.50", "$1 000", "$1.5k").
Anything else (another currency, several amounts, three decimals, a price per night) gets a question,
never a guess, so no payout or ticket is ever made for an amount other than the one written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, localcontext

# Every word that holds a digit is one token, taken whole with its sign,
# currency symbol, separators and glued letters, so a readable prefix such as
# "100.00" of "100.009", or "1" of "1e309", is never read on its own.
_SPACES = " \u00a0\u2009\u202f"  # thousands are grouped with plain, no-break and thin spaces
_TOKEN = re.compile(rf"""
    (?<![\w.,-])(?P<sign>-?)                      # not inside a word or another number
    (?:(?P<symbol>US\$|[A-Z]{{1,3}}\$|[$€£¥₹])(?P<sign2>-?)\s?)?
    (?P<word>[^\W\d_]*\.?\d                       # letters glued in front: USD250, A4
      (?:[^\W_]                                   # digits and glued letters: 1.5k, 3rd, 1e309
      |(?<=\d)[-,.'’/:](?=\d)                    # between digits: 1,250.50  2024-03-03  10:30
      |(?<=\d)[{_SPACES}](?=\d{{3}}(?!\d))        # a space before a group of three: 1 000
      |(?<=\d[eE])[-+](?=\d))*)                   # an exponent's sign: 1e-5
""", re.X)
_PARTS = re.compile(rf"(?P<head>[^\W\d_]*)(?P<number>[\d.][-\d,.'’/:{_SPACES}]*?)"
                    r"(?P<exponent>[eE][-+]?\d+)?(?P<suffix>[^\W\d_]*)")
_WHOLE_DOLLARS = re.compile(rf"\d+|\d{{1,3}}(?:,\d{{3}})+|\d{{1,3}}(?:[{_SPACES}]\d{{3}})+")
_SCALES = {"k": 10**3, "thousand": 10**3, "grand": 10**3, "hundred": 10**2,
           "m": 10**6, "mm": 10**6, "mn": 10**6, "million": 10**6, "bn": 10**9, "billion": 10**9}
_SCALE_AFTER = re.compile(rf"\s+(?P<word>{'|'.join(_SCALES)})\b", re.I)
_RATE_AFTER = re.compile(r"\s*(?:/|per\b|each\b|apiece\b|x\b|×|times\b)", re.I)  # $250/night, $250 x 2

_CURRENCY = (
    r"(?P<usd>US\$|\$|\bUSD\b|\bdollars?\b|\bbucks\b)"
    r"|(?P<other>[A-Z]{1,3}\$|[€£¥₹]|\b(?:EUR|GBP|JPY|CHF|CAD|AUD|NZD|CNY|RMB|INR|MXN|BRL|SEK|NOK|DKK|"
    r"PLN|HKD|SGD|ZAR|KRW|euros?|pounds?|sterling|yen|yuan|francs?|rupees?|pesos?|kron(?:a|or|er|e)|"
    r"(?:canadian|australian|singapore|hong kong|new zealand|hk|nt)\s+dollars?)\b)"
)
_CURRENCY_WORD = re.compile(_CURRENCY, re.I)
_CURRENCY_BEFORE = re.compile(rf"(?:{_CURRENCY})\s*$", re.I)
_CURRENCY_AFTER = re.compile(rf"\s*(?:{_CURRENCY})", re.I)
# A bare number right after these words is the dollars spent: "I spent 42.50 on a taxi".
_SPENT_BEFORE = re.compile(r"\b(?:reimburse|pay|paid|spent|spend|cost|costs|of)\s+(?:me\s+)?$", re.I)

# Numbers that are clearly not money: dates, times, counts, measures and labels.
_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
          r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b\.?")
_DATE_OR_TIME = re.compile(r"\d{4}-\d\d?-\d\d?|\d\d?/\d\d?(?:/\d{2,4})?|\d\d?[.-]\d\d?[.-]\d{2,4}|\d\d?:\d\d")
_LABEL_BEFORE = re.compile(
    r"(?:\#|\b(?:room|table|flight|seat|gate|invoice|receipt|order|ticket|no\.)"
    rf"|\b{_MONTH}(?:\s+\d\d?(?:[-–]\d\d?)?(?:st|nd|rd|th)?,?)?)\s*$", re.I,
)
_UNITS = (r"%|percent|st|nd|rd|th|[ap]\.?m|(?:night|day|week|month|year|hour|minute|"
          r"people|person|guest|attendee|colleague|ticket|item|page|km|mile|kg|lb)s?")
_UNIT = re.compile(_UNITS, re.I)
_UNIT_AFTER = re.compile(rf"[\s-]*(?:(?:of\s+)?{_MONTH}|(?:{_UNITS})(?!\w))", re.I)

_CENT = Decimal("0.01")
# Exact arithmetic for any number a message can hold: the default 28 digits would round a 40-digit
# figure. Whether it is too large is the amount rule's to say (ledger/inputs.py), on the number as written.
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
_ASK = "Please write the amount in dollars and cents, e.g. {example}."


@dataclass(frozen=True)
class Money:
    """A number in a message that may be an amount, as written and as read."""

    text: str
    span: tuple[int, int]
    currency: str  # "USD", "other", or "" when nothing says which
    value: Decimal | None  # the exact dollars, or None and `question` says what is unclear
    question: str | None = None


def find_amount(text: str) -> tuple[Decimal, tuple[int, int]] | str | None:
    """The one dollar amount in `text` and where it stands, a question when it is unclear, or None."""
    money = find_money(text)
    # Another currency anywhere ("$250 EUR", "$250, paid in euros") leaves the dollars in doubt.
    if any(m.currency == "other" for m in money) or any(m["other"] for m in _CURRENCY_WORD.finditer(text)):
        return "Sorry, I can only reimburse US dollars. Please give the amount in USD, e.g. $250."
    if len(money) > 1:
        return (f"I see more than one amount ({', '.join(m.text for m in money)}). Please send one "
                "expense at a time, e.g. 'Reimburse $250.00 for the team lunch'.")
    if not money or money[0].currency != "USD":
        return None
    [amount] = money
    if amount.value is None:
        return amount.question
    return amount.value, amount.span


def find_money(text: str) -> list[Money]:
    """Every number in `text` that may be an amount, in order; dates, counts and labels are left out."""
    found = []
    for token in _TOKEN.finditer(text):
        before, after = text[: token.start()], text[token.end():]
        parts = _PARTS.fullmatch(token["word"])
        currency = _named_currency(token, parts, before, after)
        if not currency:
            if _not_money(parts, before, after):
                continue
            currency = "USD" if _SPENT_BEFORE.search(before) else ""
        found.append(Money(token[0], token.span(), currency, *_dollars(token, parts, after)))
    return found


def _named_currency(token: re.Match[str], parts: re.Match[str] | None, before: str, after: str) -> str:
    """"other" if a currency but the dollar is named at the number, "USD" if the dollar is, else ""."""
    glued = parts.group("head", "suffix") if parts else ()
    names = [_CURRENCY_WORD.fullmatch(word) for word in (token["symbol"] or "", *glued)]
    names += [_CURRENCY_BEFORE.search(before), _CURRENCY_AFTER.match(after)]
    if any(name and name["other"] for name in names):
        return "other"
    return "USD" if any(names) else ""


def _not_money(parts: re.Match[str] | None, before: str, after: str) -> bool:
    """True for a number with no currency named that is a date, time, count, label or code."""
    if parts is None:
        return True  # letters and digits mixed: an id such as "d74cb06"
    if any(space in parts["number"] for space in _SPACES):
        return False  # "room 12 250" may be a room and an amount: never drop it
    return (
        0 < len(parts["head"]) <= 2 or bool(_UNIT.fullmatch(parts["suffix"]))  # "A4", "Q3", "3rd", "5pm"
        or bool(_DATE_OR_TIME.fullmatch(parts["number"]) or _LABEL_BEFORE.search(before))
        or bool(_UNIT_AFTER.match(after))
    )


def _dollars(token: re.Match[str], parts: re.Match[str] | None, after: str) -> tuple[Decimal | None, str | None]:
    """The exact dollars `token` says, or None and the question to ask about it."""
    with localcontext(_EXACT):
        unreadable = None, f"I cannot read {token[0]} as an amount. " + _ASK.format(example="$1,250.50")
        # Digits other than 0-9 ("١٠٠٠٠", "１０００") are digits to Python, not to a reader checking a receipt.
        if parts is None or parts["exponent"] or any(c.isdigit() and not c.isascii() for c in token[0]):
            return unreadable
        head, suffix = ("" if _CURRENCY_WORD.fullmatch(word) else word for word in parts.group("head", "suffix"))
        whole, _, cents = parts["number"].partition(".")
        if head or not _WHOLE_DOLLARS.fullmatch(whole) or not (cents.isdigit() or cents == ""):
            return unreadable
        value = Decimal(re.sub(f"[,{_SPACES}]", "", whole) + (f".{cents}" if cents else ""))
        value = -value if token["sign"] or token["sign2"] else value
        scale = _SCALE_AFTER.match(after)
        if suffix.lower() == "k" and not scale:
            value *= 1000
        elif suffix or scale:
            # Only "$1.5k" is read; other scales are confirmed ("M" is a thousand in accounting).
            multiplier = _SCALES.get((scale["word"] if scale else suffix).lower())
            if multiplier is None:
                return unreadable
            meant = f"${value * multiplier:,.2f}"
            return None, f"Did you mean {meant}? " + _ASK.format(example=meant)
        if value != value.quantize(_CENT):
            return None, f"{token[0]} has more than two decimals. " + _ASK.format(example="$1,250.50")
        if _RATE_AFTER.match(after):
            return None, (f"Is {token[0]} the total, or a price per night or per item? "
                          "Please write the total in dollars and cents, e.g. $1,250.50.")
        return value.quantize(_CENT), None
