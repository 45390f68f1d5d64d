"""What the database cannot store is the client's mistake, said so; what fails in the database is said
without its SQL; and /health tells a database that takes no writes.

PostgreSQL refuses NUL characters and ids longer than their columns; SQLite
stores them. Either way they are refused before they reach the database, as
a 4xx with a fix. Where the database itself refuses a value, that is a 4xx
too, not "database unavailable". No answer carries the SQL statement or its
parameters (SQLAlchemy's error message has both), on `make web`'s server and in
its SSE error events.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from support.http import assert_error, run_body, user_text
from support.servers import APP, LUNCH, in_process

SQL_MARKERS = ("[SQL:", "INSERT INTO", "SELECT ", "sqlalchemy", "[parameters:", "asyncpg", "sqlite3")


def assert_no_sql(answer: httpx.Response) -> None:
    leaked = [marker for marker in SQL_MARKERS if marker in answer.text]
    assert not leaked, answer.text


def assert_refused(answer: httpx.Response, error: str) -> None:
    """A 4xx, JSON with the error code, what is wrong and what to do; no SQL."""
    assert 400 <= answer.status_code < 500, answer.text
    body = answer.json()
    assert body["error"] == error and body["message"] and body["fix"], body
    assert_no_sql(answer)


def chat(session_id: str, text: str, user: str = "alice") -> dict:
    return run_body(user, session_id, user_text(text))


async def test_nul_characters_and_long_ids_are_a_4xx_with_a_fix_on_every_route(desk, db_url, configure):
    configure(approvers={"bob-token": "bob"})
    async with in_process(desk) as client:
        made = await client.post(f"/apps/{APP}/users/alice/sessions", json={})
        session_id = made.json()["id"]
        long_id = "s" * 129
        bob = {"Authorization": "Bearer bob-token"}
        refusals = [
            (client.post(f"/apps/{APP}/users/alice/sessions", json={"sessionId": long_id}), "invalid_session_id"),
            (client.post(f"/apps/{APP}/users/alice/sessions/{long_id}", json={}), "invalid_session_id"),
            (client.get(f"/apps/{APP}/users/alice/sessions/{long_id}"), "invalid_session_id"),
            (client.post("/run", json=chat(long_id, "hello")), "invalid_session_id"),
            (client.post(f"/apps/{APP}/users/alice/sessions", json={"state": {"note": "a\u0000b"}}),
             "invalid_characters"),
            (client.patch(f"/apps/{APP}/users/alice/sessions/{session_id}", json={"stateDelta": {"a": "\u0000"}}),
             "invalid_characters"),
            (client.post("/apps/long%00/users/alice/sessions", json={}), "invalid_characters"),
            (client.get("/apps/long_running_agent%00/users/alice/sessions"), "invalid_characters"),
            (client.get(f"/apps/{APP}/users/alice/sessions/a%00b"), "invalid_characters"),
            (client.post("/api/approvals/T-%00/approve", headers=bob), "invalid_characters"),
            (client.get("/api/approvals/T-%00", headers=bob), "invalid_characters"),
            (client.post("/run", json=chat(session_id, "Reimburse $20\u0000 for lunch")), "invalid_characters"),
            (client.post("/run_sse", json=chat(session_id, "Reimburse $20\u0000 for lunch")), "invalid_characters"),
            # JSON's \ud800 escape: half a character, which no database stores as text.
            (client.post("/run", content=json.dumps(chat(session_id, "lone \ud800 half")),
                         headers={"content-type": "application/json"}), "invalid_characters"),
            (client.post("/run", json=chat("a\u0000b", "hello")), "invalid_characters"),
            (client.post("/run", json=run_body("alice", session_id, user_text("hi")) | {"appName": "nope"}),
             "app_not_found"),
            (client.post("/apps/nope/users/alice/sessions", json={}), "app_not_found"),
        ]
        for request, error in refusals:
            assert_refused(await request, error)

        # Ids in a body (an event's, a run's invocation): the same answer on SQLite as on PostgreSQL.
        event = {"id": "e" * 200, "author": "user", "invocationId": "i-1",
                 "content": {"role": "user", "parts": [{"text": "hello"}]}}
        assert_refused(await client.post(f"/apps/{APP}/users/alice/sessions", json={"events": [event]}),
                       "invalid_id")
        assert_refused(await client.post("/run", json=chat(session_id, "hello") | {"invocationId": "i" * 1000}),
                       "invalid_id")

        # None of it was stored, and the database is fine.
        listed = await client.get(f"/apps/{APP}/users/alice/sessions")
        assert all(len(s["id"]) <= 128 and s["state"] == {} for s in listed.json()), listed.text
        assert (await client.get("/health")).json() == {"status": "ok", "database": "ok"}
        ran = await client.post("/run", json=chat(session_id, "Reimburse $20 for lunch"))
        assert ran.status_code == 200, ran.text


@contextmanager
def unwritable_journal(database: Path) -> Iterator[None]:
    """SQLite's rollback journal made unwritable, as a full or read-only disk leaves it ("disk I/O error").

    Tests run as root, where permissions do not bite; the immutable flag does.
    A filesystem without it gets a directory where the journal goes, which
    SQLite cannot open either.
    """
    journal = database.with_name(database.name + "-journal")
    journal.touch()
    immutable = subprocess.run(["chattr", "+i", str(journal)], capture_output=True).returncode == 0
    if not immutable:
        journal.unlink()
        journal.mkdir()
    try:
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(journal)], check=True)
        else:
            journal.rmdir()


@pytest.mark.subprocess
async def test_an_unwritable_sqlite_journal_fails_health_and_no_answer_carries_sql(desk, sqlite_url):
    async with in_process(desk) as client:
        made = await client.post(f"/apps/{APP}/users/alice/sessions", json={})
        session_id = made.json()["id"]
        assert (await client.get("/health")).status_code == 200

        with unwritable_journal(Path(make_url(sqlite_url).database or "")):
            created = await client.post(f"/apps/{APP}/users/alice/sessions", json={})
            assert_error(created, 503, "database_unavailable")
            assert_no_sql(created)
            ran = await client.post("/run", json=chat(session_id, LUNCH))
            assert_error(ran, 503, "database_unavailable")
            assert_no_sql(ran)
            streamed = await client.post("/run_sse", json=chat(session_id, LUNCH))
            assert_no_sql(streamed)
            # The stream had started (200) when the run failed: its last event says so, as JSON.
            last = json.loads(streamed.text.strip().split("data:")[-1])
            assert last["error"] == "database_unavailable" and last["fix"], streamed.text
            health = await client.get("/health")
            assert health.status_code == 503 and health.json()["database"].startswith("unwritable"), health.text

        assert (await client.get("/health")).json() == {"status": "ok", "database": "ok"}
        ran = await client.post("/run", json=chat(session_id, "Reimburse $20 for lunch"))
        assert ran.status_code == 200, ran.text


async def test_a_failed_delivery_is_shown_without_the_sql_of_its_error(desk, db_url, configure):
    configure(approvers={"bob-token": "bob"})
    async with in_process(desk) as client:
        ledger = desk.ledger
        ticket = await ledger.tickets.open(app_name=APP, user_id="alice", session_id="s", call_id="c",
                                          call_name="ask_for_approval", purpose="team lunch", amount_cents=25000,
                                          ttl=timedelta(hours=1))
        try:
            async with ledger.engine.connect() as connection:
                await connection.execute(text("INSERT INTO no_such_table VALUES (:secret)"), {"secret": "s3cret"})
        except DBAPIError as error:
            failure = error
        # What the guard records when a run that delivers a decision fails.
        await ledger.deliveries.mark_undelivered(ticket.id, actor="approval_guard", error=f"the run failed: {failure}")

        shown = await client.get(f"/api/approvals/{ticket.id}", headers={"Authorization": "Bearer bob-token"})

    assert shown.status_code == 200, shown.text
    assert shown.json()["ticket"]["delivery_error"].startswith("the run failed: "), shown.text
    assert "s3cret" not in shown.text
    assert_no_sql(shown)
