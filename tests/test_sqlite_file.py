"""The SQLite file under damage: no shared-memory file to lose, and no silent second file.

In WAL mode SQLite maps a `-shm` file into every process, and truncating it
under a running server killed the server with SIGBUS. The app uses a
rollback journal instead (ledger/storage/engine.py), with one engine per database in
a process, shared by the ledger and ADK's session store (desk.py). A
database file deleted or replaced while a process uses it stops that process
with `DatabaseFileGone` (JSON 503 on the server, one `error:` line on the CLI)
rather than leaving it on the old file while new processes use a new one. A client
that hangs up mid-run leaves the file writable at once, not after the busy timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sqlite3
from pathlib import Path

import aiosqlite
import httpx
import pytest
from google.adk.sessions import DatabaseSessionService
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine
from support.http import as_approver, assert_error, new_session, request_over_run, run_body, user_text
from support.processes import run
from support.servers import APP, LUNCH, web_server

from long_running_agent.cli import commands, entry
from long_running_agent.ledger import DatabaseFileGone
from long_running_agent.ledger.storage.engine import create_engine


def database_file(url: str) -> Path:
    return Path(make_url(url).database or "")


@pytest.mark.subprocess
async def test_server_keeps_answering_when_the_sqlite_side_files_are_truncated(tmp_path):
    with web_server(tmp_path) as server:
        db = database_file(server.database_url)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:

            async def traffic() -> None:
                for _ in range(3):
                    await request_over_run(client)
                    listed = await client.get("/api/approvals", headers=as_approver("bob"))
                    assert listed.status_code == 200, listed.text

            busy = asyncio.gather(*(traffic() for _ in range(3)))
            seen: set[str] = set()
            while not busy.done():
                # What was done to the WAL index: truncate it to 0 bytes mid-traffic.
                for side_file in db.parent.glob(db.name + "-*"):
                    seen.add(side_file.name.removeprefix(db.name))
                    with contextlib.suppress(FileNotFoundError):
                        os.truncate(side_file, 0)
                await asyncio.sleep(0.02)
            await busy

            assert (await client.get("/health")).status_code == 200
            assert (await client.get("/api/approvals", headers=as_approver("bob"))).json()["pending"]
        assert not seen & {"-shm", "-wal"}, seen


@pytest.mark.subprocess
async def test_deleted_database_file_is_a_json_503_not_a_second_file(tmp_path):
    with web_server(tmp_path) as server:
        db = database_file(server.database_url)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
            session_id, _call, ticket_id = await request_over_run(client)
            db.unlink()

            assert_error(await client.get("/api/approvals", headers=as_approver("bob")), 503, "database_file_gone")
            assert_error(await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("bob")),
                         503, "database_file_gone")
            assert_error(await client.post("/run", json=run_body("alice", session_id, user_text(LUNCH))),
                         503, "database_file_gone")
            assert_error(await client.get(f"/apps/{APP}/users/alice/sessions/{session_id}"), 503, "database_file_gone")
            # ADK's create-session route wraps its store's errors in a 500 {"detail"}; still the same answer.
            assert_error(await client.post(f"/apps/{APP}/users/alice/sessions", json={}), 503, "database_file_gone")
            assert (await client.get("/health")).status_code == 503
            assert not db.exists(), "the server made a new, empty file"

            # A new CLI process starts on a new file; the server does not follow it there.
            inbox = run("inbox", url=server.database_url)
            assert inbox.returncode == 0 and "No pending tickets." in inbox.stdout, inbox.stderr
            assert_error(await client.get("/api/approvals", headers=as_approver("bob")), 503, "database_file_gone")

    # Restarted, the server uses the file at the path: one file for everyone again.
    with web_server(tmp_path, name="restarted") as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
            await new_session(client, "alice")
            listed = await client.get("/api/approvals", headers=as_approver("bob"))
            assert listed.status_code == 200 and listed.json()["pending"] == []


@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_ledger_and_sessions_stop_on_a_file_that_is_not_the_one_they_opened(sqlite_url, tmp_path, how, desk):
    await desk.sessions.create_session(app_name=APP, user_id="alice")
    assert await desk.ledger.tickets.count() == 0
    db = database_file(sqlite_url)
    if how == "deleted":
        db.unlink()
    else:
        other = tmp_path / "other.db"
        sqlite3.connect(other).close()
        os.replace(other, db)

    with pytest.raises(DatabaseFileGone):
        await desk.ledger.tickets.count()
    with pytest.raises(DatabaseFileGone):
        await desk.sessions.list_sessions(app_name=APP, user_id="alice")
    assert db.exists() == (how == "replaced")


@pytest.mark.subprocess
def test_cli_says_in_one_line_that_the_database_file_is_gone(sqlite_url, desk, capsys):
    args = argparse.Namespace(verbose=False, limit=20, offset=0)

    async def inbox_after_the_file_is_deleted(out) -> int:
        await desk.ledger.tickets.count()
        database_file(sqlite_url).unlink()
        return await commands.inbox(desk, args, out)

    assert entry.run(desk, inbox_after_the_file_is_deleted) != 0

    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ") and database_file(sqlite_url).name in line


async def test_ledger_and_sessions_share_one_engine_per_database(sqlite_url, tmp_path, monkeypatch, desk):
    other = f"sqlite+aiosqlite:///{tmp_path}/other.db"
    assert desk.sessions.db_engine is desk.ledger.engine  # type: ignore[attr-defined]
    assert desk.sessions_at(other).db_engine is desk.ledger_at(other).engine  # type: ignore[attr-defined]
    assert desk.ledger.engine is not desk.ledger_at(other).engine
    engines = {id(desk.ledger.engine), id(desk.ledger_at(other).engine)}

    disposed: list[AsyncEngine] = []
    real_dispose = AsyncEngine.dispose

    async def counting_dispose(engine: AsyncEngine, close: bool = True) -> None:
        disposed.append(engine)
        await real_dispose(engine, close)

    monkeypatch.setattr(AsyncEngine, "dispose", counting_dispose)
    await desk.close()
    assert sorted(map(id, disposed)) == sorted(engines)


async def test_a_servers_session_store_brings_its_engine_to_the_ledger(sqlite_url, desk):
    # What the web server does: ADK's routes need their session store before the event loop runs.
    served = DatabaseSessionService(db_engine=create_engine(sqlite_url))
    desk.use_sessions(served)
    assert desk.ledger.engine is served.db_engine and desk.sessions is served


def wal_mode_file(db: Path) -> sqlite3.Connection:
    """A database file as an older version left it: in WAL mode, with a row in it."""
    old = sqlite3.connect(db)
    old.execute("PRAGMA journal_mode=WAL")
    old.execute("CREATE TABLE kept (note TEXT)")
    old.execute("INSERT INTO kept VALUES ('written in WAL mode')")
    old.commit()
    return old


async def test_a_file_left_in_wal_mode_is_switched_to_a_rollback_journal(sqlite_url, tmp_path, desk):
    db = database_file(sqlite_url)
    wal_mode_file(db).close()

    assert await desk.ledger.tickets.count() == 0

    assert not [path.name for path in tmp_path.iterdir() if path.name.endswith(("-shm", "-wal"))]
    check = sqlite3.connect(db)
    assert check.execute("PRAGMA journal_mode").fetchone()[0] != "wal"  # a rollback journal is per connection
    assert check.execute("SELECT note FROM kept").fetchall() == [("written in WAL mode",)]
    check.close()


async def test_a_wal_file_another_connection_holds_stays_usable_and_the_log_says_what_to_do(sqlite_url, caplog, desk):
    db = database_file(sqlite_url)
    holder = wal_mode_file(db)  # still open, as a server of an older version would hold it
    try:
        with caplog.at_level(logging.WARNING, logger="long_running_agent.ledger.storage.engine"):
            assert await desk.ledger.tickets.count() == 0
    finally:
        holder.close()

    warnings = [r.getMessage() for r in caplog.records if r.name == "long_running_agent.ledger.storage.engine"]
    assert warnings and all(str(db) in warning for warning in warnings), warnings


async def test_a_connection_back_in_the_pool_keeps_no_uncommitted_write_and_costs_no_rollback_after_a_commit(
        tmp_path, monkeypatch):
    rollbacks: list[int] = []
    rollback = aiosqlite.Connection.rollback

    async def counted(connection: aiosqlite.Connection) -> None:
        rollbacks.append(1)
        await rollback(connection)

    monkeypatch.setattr(aiosqlite.Connection, "rollback", counted)
    ledger_engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'reset.db'}")
    try:
        async with ledger_engine.begin() as db:
            await db.exec_driver_sql("CREATE TABLE kept (n INTEGER)")
        rollbacks.clear()  # SQLAlchemy's look at a new connection ends in one
        async with ledger_engine.begin() as db:
            await db.exec_driver_sql("INSERT INTO kept VALUES (1)")
        assert rollbacks == []  # committed: nothing was left to undo

        async with ledger_engine.connect() as db:  # a write sent past SQLAlchemy's own transaction
            await db.run_sync(lambda sync: sync.connection.dbapi_connection.cursor().execute(
                "INSERT INTO kept VALUES (2)"))
        assert rollbacks == [1]

        async with ledger_engine.connect() as db:
            assert list(await db.scalars(text("SELECT n FROM kept"))) == [1]
            await db.exec_driver_sql("INSERT INTO kept VALUES (3)")  # the next writer is not locked out
    finally:
        await ledger_engine.dispose()


@pytest.mark.subprocess
async def test_clients_hanging_up_mid_run_leave_the_server_answering_at_once(tmp_path):
    async def hang_up(client: httpx.AsyncClient, user: str, after_s: float) -> None:
        session_id = await new_session(client, user)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(after_s), client.stream(
                    "POST", "/run_sse", json=run_body(user, session_id, user_text(LUNCH))) as streamed:
                async for _chunk in streamed.aiter_bytes():
                    pass

    with web_server(tmp_path) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=15) as client:  # under the 30 s busy timeout
            for burst in range(12):
                await asyncio.gather(*(hang_up(client, f"leaver-{burst}-{n}", (burst * 4 + n) % 13 / 50)
                                       for n in range(4)))
            _session_id, _call, ticket_id = await request_over_run(client, "stayer")
            decided = await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("bob"))
            assert decided.status_code == 200, decided.text
        log = server.log.read_text()
    assert "database is locked" not in log, log[-3000:]
    with contextlib.closing(sqlite3.connect(database_file(server.database_url))) as db:
        assert db.execute("SELECT count(*) FROM approval_payouts WHERE ticket_id = ?", (ticket_id,)).fetchone() == (1,)
        assert db.execute("SELECT max(paid) FROM (SELECT count(*) AS paid FROM approval_payouts GROUP BY ticket_id)"
                          ).fetchone() == (1,)


async def test_a_read_cut_short_by_a_client_hanging_up_leaves_the_file_writable_at_once(tmp_path, monkeypatch):
    path = tmp_path / "hung-up.db"
    ledger_engine = create_engine(f"sqlite+aiosqlite:///{path}")
    async with ledger_engine.begin() as db:
        await db.exec_driver_sql("CREATE TABLE kept (n INTEGER)")
        await db.exec_driver_sql("INSERT INTO kept VALUES (1), (2), (3)")
    reading = asyncio.Event()

    async def stalled(_cursor: aiosqlite.Cursor) -> None:  # the read has begun; its rows are not fetched yet
        reading.set()
        await asyncio.Event().wait()

    fetchall = aiosqlite.Cursor.fetchall
    monkeypatch.setattr(aiosqlite.Cursor, "fetchall", stalled)

    async def read() -> None:
        async with ledger_engine.connect() as db:
            await db.execute(text("SELECT n FROM kept"))

    hung_up = asyncio.create_task(read())
    await reading.wait()
    hung_up.cancel()  # as the server does when the client of a streamed run goes away
    with pytest.raises(asyncio.CancelledError):
        await hung_up
    monkeypatch.setattr(aiosqlite.Cursor, "fetchall", fetchall)
    try:
        async with asyncio.timeout(5):  # not the 30 s busy timeout
            async with ledger_engine.begin() as db:
                await db.exec_driver_sql("INSERT INTO kept VALUES (4)")
        other_process = sqlite3.connect(path, timeout=1)  # the approver CLI, say
        with other_process:
            other_process.execute("INSERT INTO kept VALUES (5)")
        other_process.close()
        async with ledger_engine.connect() as db:
            assert sorted(await db.scalars(text("SELECT n FROM kept"))) == [1, 2, 3, 4, 5]
    finally:
        await ledger_engine.dispose()
