"""The slow tests declare their marks, and `make test-fast` cannot take one that forgot its mark.

tests/support/markers.py fails a test that starts Python, `adk` or `expenses`
without the `subprocess` mark, or uses the session's PostgreSQL server without
the `postgres` mark; these run that guard on small suites of their own.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import processes, warm
from support.markers import programs_started

MARKS = "[pytest]\nmarkers =\n    subprocess: starts a process\n    postgres: needs PostgreSQL\n"


def guarded(pytester: pytest.Pytester, tests: str) -> pytest.RunResult:
    pytester.makeini(MARKS)
    pytester.makepyfile(tests)
    return pytester.runpytest_inprocess("-p", "support.markers", "-p", "no:cacheprovider", "-p", "no:asyncio",
                                       "--strict-markers")


@pytest.mark.subprocess
def test_a_test_that_starts_python_without_the_subprocess_mark_fails_and_says_what_to_add(pytester):
    result = guarded(pytester, """
        import subprocess, sys
        import pytest

        def test_unmarked():
            subprocess.run([sys.executable, "-c", "pass"], check=True)

        @pytest.mark.subprocess
        def test_marked():
            subprocess.run([sys.executable, "-c", "pass"], check=True)
    """)
    result.assert_outcomes(passed=2, errors=1)  # test_unmarked passes its body, then the guard fails it
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_unmarked*", "*without the `subprocess` mark*"])


def test_a_test_on_the_postgres_server_without_the_postgres_mark_fails_and_says_what_to_add(pytester):
    result = guarded(pytester, """
        import pytest

        @pytest.fixture
        def postgres_admin_url():  # the shared fixture's name; no server needed to check the guard
            return "postgresql+asyncpg://postgres@127.0.0.1:1/postgres"

        @pytest.fixture
        def postgres_url(request):  # asked for by name, as db_url does
            return request.getfixturevalue("postgres_admin_url") + "_x"

        def test_unmarked(postgres_url):
            pass

        @pytest.mark.postgres
        def test_marked(postgres_url):
            pass

        def test_without_postgres():
            pass
    """)
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_unmarked*", "*without the `postgres` mark*"])


def test_the_postgres_side_of_db_url_is_marked_and_the_sqlite_side_is_not(request, db_url):
    marked = request.node.get_closest_marker("postgres") is not None
    assert marked == db_url.startswith("postgresql"), db_url


@pytest.mark.subprocess
def test_a_started_python_is_seen_and_a_shell_tool_is_not(sqlite_url):
    with programs_started() as started:
        subprocess.run(["true"], check=True)
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        assert processes.run("inbox", url=sqlite_url).returncode == 0  # forked, not started (support/warm.py)
    assert [name.startswith("python") for name in started] == [True, True]
    assert subprocess.Popen.__name__ == "Popen" and warm.start.__name__ == "start"  # put back after the block
