"""Schema migrations: a database made by release 0.1 upgrades and keeps working; nothing stops halfway.

The release 0.1 databases come from tests/support/releases.py.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.engine import Connection
from support import cli, sources
from support.desks import TestDesk
from support.processes import run, serve
from support.releases import load_release_0_1

from long_running_agent.desk import Desk
from long_running_agent.ledger import Ledger
from long_running_agent.ledger.storage import migrate
from long_running_agent.ledger.storage.schema import Base
from long_running_agent.names import EXPENSES

LEDGER_TABLES = set(Base.metadata.tables)


def _differences(connection: Connection) -> list[object]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return [d for d in compare_metadata(context, Base.metadata) if _names_a_ledger_table(d)]


def _names_a_ledger_table(difference: object) -> bool:
    text = repr(difference)
    return any(f"'{table}'" in text or f"name='{table}'" in text for table in LEDGER_TABLES)


async def _schema_differences(ledger: Ledger) -> list[object]:
    async with ledger.engine.connect() as connection:
        return await connection.run_sync(_differences)


def _upgrade_with_alembic(connection: Connection) -> None:
    from alembic import command

    cfg = migrate.config()
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, "head")


async def test_the_migrations_build_exactly_the_tables_the_code_declares(desk, db_url):
    async with desk.ledger.engine.begin() as connection:
        await connection.run_sync(_upgrade_with_alembic)

    assert await _schema_differences(desk.ledger) == [], "storage/schema.py and migrations/ disagree; add a migration"


async def test_a_new_database_is_built_in_one_step_as_the_migrations_would_build_it(desk, db_url, tmp_path):
    if db_url.startswith("sqlite"):  # not the test's own file, which starts as a copy (support/ledger_template.py)
        db_url = f"sqlite+aiosqlite:///{tmp_path}/new.db"
    ledger = desk.ledger_at(db_url)
    assert await ledger.prepare() == (None, migrate.head())

    assert await _schema_differences(ledger) == []
    assert await _stamped(ledger) == migrate.head()
    counter = sources.migration("0007")  # the pending tickets' counter: the same triggers, counting from 0
    assert migrate._SQLITE_COUNT == counter.SQLITE_TRIGGERS
    assert migrate._POSTGRESQL_COUNT == (counter.POSTGRESQL_FUNCTION, *counter.POSTGRESQL_TRIGGERS)
    async with ledger.engine.connect() as connection:
        assert (await connection.execute(text("SELECT shard, pending FROM pending_counts"))).all() == [(0, 0)]


def _objects(path: Path) -> set[tuple[str, str, str | None]]:
    with sqlite3.connect(path) as db:
        return {(kind, name, sql if kind == "trigger" else None) for kind, name, sql in db.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")}


async def test_a_new_sqlite_file_has_every_table_index_and_trigger_the_migrations_make(desk, tmp_path):
    migrated, built = f"sqlite+aiosqlite:///{tmp_path}/migrated.db", f"sqlite+aiosqlite:///{tmp_path}/built.db"
    async with desk.ledger_at(migrated).engine.begin() as connection:
        await connection.run_sync(_upgrade_with_alembic)
    assert await desk.ledger_at(built).prepare() == (None, migrate.head())

    assert _objects(tmp_path / "migrated.db") == _objects(tmp_path / "built.db")


def test_a_release_0_1_database_upgrades_and_its_pending_ticket_pays_once(desk, db_url):
    load_release_0_1(db_url)

    upgraded = cli.expenses("migrate", url=db_url)
    assert upgraded.returncode == 0, upgraded.stderr
    assert f"from schema revision 0001 to {migrate.head()}" in upgraded.stdout
    differences = asyncio.run(_closing(desk, _schema_differences(desk.ledger)))
    assert differences == [], "an upgraded database differs from a new one"

    inbox = cli.expenses("inbox", url=db_url)
    [pending] = re.findall(r"^(T-[0-9a-f]{12}) +alice +\$480\.00", inbox.stdout, re.M)
    approved = cli.expenses("approve", pending, "--approver", "bob", url=db_url)
    assert approved.returncode == 0, approved.stderr
    assert f"Payouts for {pending}: 1" in approved.stdout and "was paid" in approved.stdout
    again = cli.expenses("approve", pending, "--approver", "carol", url=db_url)
    assert again.returncode == 1 and "already approved by bob" in again.stderr

    history = cli.expenses("show", pending, url=db_url).stdout
    # The upgrade states each ticket's columns in its audit chain (migration 0013), for `audit verify` to compare.
    assert [a for a in re.findall(r"^\s+\S+ \S+\s+(\w+)\s+by", history, re.M)] == [
        "requested", "upgraded", "approved", "evidence", "paid", "delivered"]
    verified = cli.expenses("audit", "verify", url=db_url)
    assert verified.returncode == 0, verified.stderr
    # What 0.1 recorded before the upgrade is all still there.
    [paid_by_0_1] = [t for t in _paid_tickets(desk) if t != pending]
    paid_before = cli.expenses("show", paid_by_0_1, url=db_url).stdout
    assert "Paid: P-" in paid_before and "requested" in paid_before


async def _closing(desk: TestDesk, work):
    try:
        return await work
    finally:
        await desk.close()


def _paid_tickets(desk: TestDesk) -> list[str]:
    async def find() -> list[str]:
        try:
            return [p.ticket_id for p in await desk.ledger.payouts.find() if p.ticket_id]
        finally:
            await desk.close()

    return asyncio.run(find())


@pytest.mark.subprocess
def test_a_database_behind_is_refused_with_the_command_when_auto_migrate_is_off(sqlite_url, monkeypatch):
    load_release_0_1(sqlite_url)
    monkeypatch.setenv("AUTO_MIGRATE", "false")

    refused = run("inbox", url=sqlite_url)

    assert refused.returncode == 1
    assert "schema revision 0001" in refused.stderr and f"{EXPENSES} migrate" in refused.stderr
    with sqlite3.connect(sqlite_url.split(":///", 1)[1]) as db:
        assert db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'alembic_version'").fetchone() == (0,)


FAILING = '''
"""A revision that fails halfway, for the test."""
import sqlalchemy as sa
from alembic import op

revision = "9999"
down_revision = "{head}"


def upgrade():
    op.create_table("halfway", sa.Column("id", sa.Integer, primary_key=True))
    op.add_column("approval_tickets", sa.Column("halfway", sa.Integer))
    raise RuntimeError("the upgrade failed here")
'''


async def test_an_upgrade_that_fails_changes_nothing(desk, db_url, tmp_path, monkeypatch):
    scripts = tmp_path / "migrations"
    shutil.copytree(migrate.MIGRATIONS, scripts)
    (scripts / "versions" / "9999_halfway.py").write_text(FAILING.format(head=migrate.head()))
    ledger = desk.ledger
    await ledger.prepare()
    before = migrate.head()
    monkeypatch.setattr(migrate, "MIGRATIONS", Path(scripts))

    with pytest.raises(RuntimeError, match="failed here"):
        await migrate.migrate(ledger.engine)

    async with ledger.engine.connect() as connection:
        tables = await connection.run_sync(lambda c: set(c.dialect.get_table_names(c)))
        assert "halfway" not in tables
        assert await connection.run_sync(lambda c: MigrationContext.configure(c).get_current_revision()) == before
        columns = await connection.run_sync(lambda c: c.dialect.get_columns(c, "approval_tickets"))
    assert "halfway" not in {column["name"] for column in columns}


async def test_processes_that_prepare_one_empty_database_at_once_take_turns(db_url, desk):
    """What replicas started together do (tests/test_replicas.py runs real ones): each a desk of its own."""
    replicas = [Desk(desk.settings) for _ in range(4)]
    try:
        moved = await asyncio.gather(*(replica.prepare() for replica in replicas))
        # Each sees every table: its ledger reads and ADK's store answers.
        for replica in replicas:
            assert await replica.ledger.payouts.find() == []
            assert (await replica.sessions.list_sessions(app_name="long_running_agent", user_id="alice")).sessions == []
    finally:
        for replica in replicas:
            await replica.close()

    assert sorted(moved, key=lambda m: m[0] or "") == [(None, migrate.head())] + [(migrate.head(), migrate.head())] * 3


# --- a database this version cannot bring to its schema: one line, no traceback ------


def test_a_new_database_is_created_at_the_head_revision_and_says_so(sqlite_url):
    created = cli.expenses("migrate", url=sqlite_url)

    assert created.returncode == 0, created.stderr
    assert f"at schema revision {migrate.head()}" in created.stdout and "none" not in created.stdout


async def _stamp(ledger: Ledger, revision: str) -> None:
    """Write `revision` into alembic_version, as another version (or a hand) would have."""
    async with ledger.engine.begin() as connection:
        await connection.execute(text("UPDATE alembic_version SET version_num = :revision"), {"revision": revision})


async def _stamped(ledger: Ledger) -> str | None:
    async with ledger.engine.connect() as connection:
        return await connection.run_sync(lambda c: MigrationContext.configure(c).get_current_revision())


def _one_line_naming(result: subprocess.CompletedProcess[str], *revisions: str) -> bool:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    return (result.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: ")
            and all(revision in lines[0] for revision in revisions)
            and "Traceback" not in result.stdout + result.stderr)


# A newer version's revision; and 0003 over tables 0004 already changed (its column is there).
@pytest.mark.subprocess
@pytest.mark.parametrize("stamped_as", ["0099", "0003"])
def test_a_database_this_version_cannot_migrate_is_refused_in_one_line_everywhere(desk, db_url, stamped_as):
    assert cli.expenses("migrate", url=db_url).returncode == 0
    asyncio.run(_closing(desk, _stamp(desk.ledger, stamped_as)))

    results = {  # the approver CLI and the demo in-process; make web as the process it is
        "migrate": cli.expenses("migrate", url=db_url),
        "inbox": cli.expenses("inbox", url=db_url),
        "request": cli.expenses("request", "Reimburse $250 for the team lunch", url=db_url),
        "demo": cli.demo(url=db_url),
        "make web": serve(db_url),
    }

    refused = {name: _one_line_naming(result, stamped_as, migrate.head()) for name, result in results.items()}
    assert refused == dict.fromkeys(results, True), {n: r.stdout + r.stderr for n, r in results.items()}
    assert asyncio.run(_closing(desk, _stamped(desk.ledger))) == stamped_as  # nothing was changed


def _migrated_then_changed_by_hand(desk: TestDesk, statement: str) -> None:
    assert cli.expenses("migrate", url=desk.settings.database_url).returncode == 0

    async def change() -> None:
        async with desk.ledger.engine.begin() as connection:
            await connection.execute(text(statement))
    asyncio.run(_closing(desk, change()))


def test_a_version_table_edited_by_hand_to_name_two_revisions_is_refused_in_one_line(desk, sqlite_url):
    _migrated_then_changed_by_hand(desk, "INSERT INTO alembic_version (version_num) VALUES ('0003')")

    for command in ("migrate", "inbox"):
        assert _one_line_naming(cli.expenses(command, url=sqlite_url), "0003", migrate.head())


def test_a_table_dropped_by_hand_is_refused_in_one_line_not_met_mid_request(desk, sqlite_url):
    _migrated_then_changed_by_hand(desk, "DROP TABLE request_totals")

    for command in (("migrate",), ("request", "Reimburse $250 for the team lunch")):
        assert _one_line_naming(cli.expenses(*command, url=sqlite_url), "request_totals", migrate.head())


def test_the_revisions_read_without_alembic_are_alembics():
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(migrate.config())

    assert migrate._revisions() == {s.revision: s.down_revision for s in scripts.walk_revisions()}
    assert migrate.head() == scripts.get_current_head()


@pytest.mark.subprocess
def test_an_approver_command_that_reads_a_current_database_imports_neither_alembic_nor_adk(sqlite_url):
    assert cli.expenses("migrate", url=sqlite_url).returncode == 0
    ticket_id = cli.request_ticket(sqlite_url)

    for command in (("inbox",), ("show", ticket_id), ("audit", "verify"), ("policy",)):
        # Python lists every module it imports on stderr (-X importtime).
        done = run(*command, url=sqlite_url, env={"PYTHONPROFILEIMPORTTIME": "1"}, fresh=True)

        assert done.returncode == 0, done.stderr
        imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                    if line.startswith("import time:")}
        assert "long_running_agent.ledger.storage.migrate" in imported
        assert "alembic" not in imported
        assert not {name for name in imported if name.startswith(("google.adk", "google.genai"))}, command
