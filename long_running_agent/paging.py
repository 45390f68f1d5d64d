"""Paging through the inbox's lists: a page is `limit` tickets from `offset`, with the total.

Offsets, not cursors: the inbox shows "showing 51–100 of 1,234" and jumps to any page, and its total is a
COUNT over the same index anyway. The order is total (oldest first, ticket id breaking ties), so pages never
overlap; a ticket decided meanwhile moves later ones up a place, never out of the list.
"""

from __future__ import annotations

from dataclasses import dataclass

# The bounds of a page, checked by FastAPI on the API (web/routes.py) and by argparse on the CLI (cli.py).
DEFAULT_LIMIT = 50
MAX_LIMIT = 200
MAX_OFFSET = 1_000_000_000  # far past any backlog, well inside a SQL BIGINT


@dataclass(frozen=True)
class Page:
    """Where one page sits in a list of `total` items."""

    offset: int
    limit: int
    total: int
    shown: int  # how many items this page holds

    @property
    def next_offset(self) -> int | None:
        following = self.offset + self.limit
        return following if following < self.total else None

    @property
    def previous_offset(self) -> int | None:
        return max(0, self.offset - self.limit) if self.offset > 0 else None

    def as_json(self) -> dict[str, int | None]:
        return {"offset": self.offset, "limit": self.limit,
                "next_offset": self.next_offset, "previous_offset": self.previous_offset}

    def describe(self) -> str:
        """'showing 1–50 of 1,234', or 'showing none of 1,234' for an empty page."""
        if not self.shown:
            return f"showing none of {self.total:,}"
        return f"showing {self.offset + 1:,}–{self.offset + self.shown:,} of {self.total:,}"
