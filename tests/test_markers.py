"""The slow tests are marked by what they start, and `make test-fast` cannot take one by mistake.

tests/support/markers.py gives `subprocess`, `browser` and `postgres` from
what a test and its fixtures reach; these check it on functions shaped like
the suite's own, on the shared fixtures, and on its guard.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import support.fixtures as shared
from playwright.async_api import async_playwright
from support.markers import Reach, programs_started
from support.postgres import new_postgres_database
from support.processes import request_ticket, run
from support.servers import in_process, web_server


def runs_the_cli(url: str) -> None:
    run("inbox", url=url)  # `.venv/bin/expenses inbox`


def runs_the_demo(url: str) -> None:
    run("--text", "Reimburse $45 for a taxi", url=url)  # `python main.py --text ...`


def through_a_helper(url: str) -> None:
    runs_the_cli(url)  # a helper of the module's own, and request_ticket below, one of support's


def serves(tmp_path) -> None:
    with web_server(tmp_path):
        pass


async def asks_in_process() -> None:
    async with in_process():
        pass


def opens_a_browser() -> object:
    return async_playwright()


def on_postgres(admin_url: str) -> str:
    return new_postgres_database(admin_url)


def imports_its_own() -> None:
    import subprocess as sp

    sp.run(["true"], check=True)


@pytest.mark.parametrize("function, marks", [
    (runs_the_cli, {"subprocess"}),
    (runs_the_demo, {"subprocess"}),
    (through_a_helper, {"subprocess"}),
    (request_ticket, {"subprocess"}),
    (serves, {"subprocess"}),
    (imports_its_own, {"subprocess"}),
    (opens_a_browser, {"browser"}),
    (on_postgres, {"postgres"}),
    (asks_in_process, set()),  # make web's app in this process: fast
], ids=lambda value: getattr(value, "__name__", None) or ",".join(sorted(value)) or "none")
def test_a_function_earns_the_marks_of_what_it_reaches(function, marks):
    assert Reach().marks(function) == marks


def test_the_postgres_side_of_db_url_is_marked_and_the_sqlite_side_is_not(request, db_url):
    marked = request.node.get_closest_marker("postgres") is not None
    assert marked == db_url.startswith("postgresql"), db_url


def test_the_shared_server_fixture_earns_subprocess():
    assert Reach().marks(shared.server) == {"subprocess"}  # and so every test that uses it, or `client`


def test_a_started_python_is_seen_and_a_shell_tool_is_not():
    with programs_started() as started:
        subprocess.run(["true"], check=True)
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert [name.startswith("python") for name in started] == [True]
    assert subprocess.Popen.__name__ == "Popen"  # put back after the block
