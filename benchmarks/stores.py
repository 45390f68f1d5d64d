"""Fresh databases for each measurement: SQLite files in a temp dir, PostgreSQL databases.

One throwaway PostgreSQL server (tests/postgres_server.py) serves the whole
run; every measurement gets its own database on it, and its own SQLite file,
so no measurement sees another's rows. Without PostgreSQL installed the
PostgreSQL figures are reported as not measured.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from tests.postgres_server import PostgresUnavailable, postgres_server

MEMORY, SQLITE, POSTGRES = "memory", "sqlite", "postgres"


class Stores:
    """Hands out a new, empty database URL per call to `fresh(store)`."""

    def __init__(self, root: Path, postgres_url: str | None) -> None:
        self.root = root
        self.postgres_url = postgres_url
        self.postgres_error: str | None = None
        self._numbers = itertools.count(1)

    @property
    def kinds(self) -> list[str]:
        return [MEMORY, SQLITE] + ([POSTGRES] if self.postgres_url else [])

    def has(self, store: str) -> bool:
        return store != POSTGRES or self.postgres_url is not None

    async def fresh(self, store: str) -> str | None:
        n = next(self._numbers)
        if store == MEMORY:
            return None
        if store == SQLITE:
            return f"sqlite+aiosqlite:///{self.root}/bench-{n}.db"
        assert self.postgres_url is not None
        name = f"bench_{n}"
        import asyncpg

        admin = await asyncpg.connect(self.postgres_url.replace("postgresql+asyncpg", "postgresql"))
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()
        return self.postgres_url.rsplit("/", 1)[0] + f"/{name}"


@contextmanager
def stores(with_postgres: bool = True) -> Iterator[Stores]:
    """A temp dir and, if PostgreSQL is installed and wanted, a server for the run."""
    root = Path(tempfile.mkdtemp(prefix="bench-"))
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, root, True)
        url, error = None, None
        if with_postgres:
            try:
                url = stack.enter_context(postgres_server("postgres_admin"))
            except PostgresUnavailable as unavailable:
                error = str(unavailable).splitlines()[0]
        found = Stores(root, url)
        found.postgres_error = error
        yield found
