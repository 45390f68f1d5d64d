"""What an error says to a person: the chain of causes behind it, and its text without the SQL."""

from __future__ import annotations

import re
from collections.abc import Iterator

# SQLAlchemy prefixes the driver's class, and appends the statement, its parameters and a link.
_SQL_TAIL = re.compile(r"\s*(?:\[SQL: |\[parameters: |\(Background on this error at: ).*", re.DOTALL)
_DRIVER = re.compile(r"\((?:sqlalchemy|sqlite3|asyncpg|psycopg)[\w.]*\) ")


def causes(error: BaseException) -> Iterator[BaseException]:
    """`error` and what caused it, outermost first (ADK and google-genai wrap the errors they pass on)."""
    seen: list[BaseException] = []
    cause: BaseException | None = error
    while cause is not None and cause not in seen:
        seen.append(cause)
        yield cause
        cause = cause.__cause__ or cause.__context__


def without_sql(text: str | None) -> str | None:
    """`text` (an error recorded for people to read) without the SQL SQLAlchemy put in it."""
    return _DRIVER.sub("", _SQL_TAIL.sub("", text)) if text else text
