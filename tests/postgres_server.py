"""A throwaway PostgreSQL server on 127.0.0.1 for tests and benchmarks.

Uses Debian's `postgresql` package (installed by `.ci/run`). As root, initdb
and pg_ctl run as the `postgres` user in a temp dir that user can enter.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


class PostgresUnavailable(RuntimeError):
    pass


def _bin_dir() -> str:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not candidates:
        raise PostgresUnavailable(
            "PostgreSQL is not installed; run: apt-get install postgresql (.ci/run does)"
        )
    return os.path.dirname(candidates[-1])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run(args: list[str], as_postgres: bool) -> None:
    if as_postgres and os.geteuid() == 0:
        args = ["runuser", "-u", "postgres", "--", *args]
    result = subprocess.run(args, cwd="/", capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise PostgresUnavailable(f"{' '.join(args)} failed: {result.stderr or result.stdout}")


@contextmanager
def postgres_server(database: str = "expenses") -> Iterator[str]:
    """Start a server, yield a `postgresql+asyncpg://` URL, stop and delete it."""
    bin_dir = _bin_dir()
    root = tempfile.mkdtemp(prefix="pg-test-")
    as_postgres = os.geteuid() == 0
    if as_postgres:
        shutil.chown(root, "postgres", "postgres")
    data = os.path.join(root, "data")
    _run([f"{bin_dir}/initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
          "--locale=C.UTF-8", "--no-sync"], as_postgres)
    port = None
    try:
        for _attempt in range(5):
            port = _free_port()
            try:
                _run([f"{bin_dir}/pg_ctl", "-D", data, "-l", f"{root}/server.log", "-w", "-t", "30",
                      "start", "-o", f"-h 127.0.0.1 -p {port} -k '' -c fsync=off "
                      "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"],
                     as_postgres)
                break
            except PostgresUnavailable:
                port = None
        if port is None:
            raise PostgresUnavailable(f"PostgreSQL did not start; see {root}/server.log")
        _run([f"{bin_dir}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", database],
             as_postgres)
        yield f"postgresql+asyncpg://postgres@127.0.0.1:{port}/{database}"
    finally:
        if port is not None:
            subprocess.run(
                (["runuser", "-u", "postgres", "--"] if as_postgres else [])
                + [f"{bin_dir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"],
                cwd="/", capture_output=True, timeout=60,
            )
        shutil.rmtree(root, ignore_errors=True)
