"""One rule per input, on every surface: the chat, the CLI and the API, on SQLite and PostgreSQL.

People are named by plain ids: `alice`, `bob.smith`, `carol@example.com`.
Names are compared in one canonical form (Unicode NFKC, trimmed, lower
case), and anything that could make two spellings look like one person
(invisible characters, control characters, look-alike letters from another
script) is refused rather than guessed at. So `Alice` and `alice ` are
alice, and `alice\\u200b` or a Cyrillic `аlice` are refused.

The limits are also what the database columns hold, so no input reaches the
database only to be cut short or refused there.
"""

from __future__ import annotations

import re
import unicodedata

MAX_NAME = 64
# Session ids, app names and call ids: ADK's session tables hold 128 characters.
MAX_ID = 128
MAX_REASON = 500
MAX_PURPOSE = 300
# A chat message longer than this is not stored: an expense request fits in a few lines.
MAX_MESSAGE = 4_000

_NAME = re.compile(r"[a-z0-9](?:[a-z0-9._@+-]*[a-z0-9])?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]")


class InputError(ValueError):
    """An input the app refuses; the message says what is wrong and what to write instead."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


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


def is_canonical_name(raw: str) -> bool:
    try:
        return name(raw) == raw
    except InputError:
        return False


def reason(raw: object, *, required: bool, needed_by: str = "A rejection") -> str | None:
    """A decision's reason: one line of text, at most MAX_REASON characters."""
    text = " ".join(raw.split()) if isinstance(raw, str) else ""
    if raw is not None and not isinstance(raw, str):
        raise InputError("reason", "The reason must be text.")
    if not text:
        if required:
            raise InputError("reason", f"{needed_by} needs a reason; the requester is told it.")
        return None
    if _CONTROL.search(text):
        raise InputError("reason", "The reason contains control or invisible characters; write plain text.")
    if len(text) > MAX_REASON:
        raise InputError("reason", f"Keep the reason under {MAX_REASON} characters; it has {len(text)}.")
    return text


def purpose(raw: object) -> str:
    """What an expense was for: one line, spacing normalised, at most MAX_PURPOSE characters."""
    if not isinstance(raw, str) or not raw.strip():
        raise InputError("purpose", "Say what the expense was for, e.g. 'team lunch'.")
    text = " ".join(raw.split())
    if _CONTROL.search(text):
        raise InputError("purpose", "The purpose contains control or invisible characters; write plain text.")
    if len(text) > MAX_PURPOSE:
        raise InputError("purpose", f"Keep the purpose under {MAX_PURPOSE} characters.")
    return text


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
