"""A guard on the marks the test modules declare, so that `make test-fast` stays fast (docs/testing.md).

Each module says what its tests start: `pytestmark = pytest.mark.subprocess`
(a list when several), or the mark on a test of its own when a module's tests
differ; the `postgres` side of `db_url` carries its mark as a parameter. A test
that starts Python, `adk` or `expenses` in another process without the
`subprocess` mark fails, and so does one that uses the session's PostgreSQL
server without the `postgres` mark, saying which mark to add.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import warm

PROGRAMS = ("python", "adk", "expenses")  # what a test without the `subprocess` mark may not start


def _program(args: Any) -> str:
    first = args if isinstance(args, (str, bytes, Path)) else next(iter(args), "")
    first = first.decode() if isinstance(first, bytes) else str(first)
    return Path(first.split()[0] if first.strip() else "").name


@contextlib.contextmanager
def programs_started() -> Iterator[list[str]]:
    """The Python, `adk` and `expenses` processes started inside the block, by name."""
    started: list[str] = []
    real = subprocess.Popen

    class Watched(real):  # type: ignore[valid-type,misc]
        def __init__(self, args: Any, *rest: Any, **options: Any) -> None:
            program = _program(args)
            if program.startswith(PROGRAMS):
                started.append(program)
            super().__init__(args, *rest, **options)

    forked = warm.start

    def watched_fork(module: str, *rest: Any, **options: Any) -> warm.Process:
        started.append("python")  # the app's server or an approver command, forked (warm.py)
        return forked(module, *rest, **options)

    subprocess.Popen, warm.start = Watched, watched_fork  # type: ignore[misc]
    try:
        yield started
    finally:
        subprocess.Popen, warm.start = real, forked  # type: ignore[misc]


@pytest.fixture(autouse=True)
def _declares_what_it_starts(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that starts a program or uses PostgreSQL without the mark `make test-fast` leaves out."""
    marked = {mark.name for mark in request.node.iter_markers()}
    started: list[str] = []
    if "subprocess" in marked:
        yield
    else:
        with programs_started() as started:
            yield
    if started:
        pytest.fail(f"this test started {', '.join(sorted(set(started)))} in another process without the "
                    "`subprocess` mark; add @pytest.mark.subprocess (or the module's pytestmark)", pytrace=False)
    if "postgres_admin_url" in request.fixturenames and "postgres" not in marked:
        pytest.fail("this test uses the PostgreSQL server without the `postgres` mark; add @pytest.mark.postgres "
                    "(or the module's pytestmark), or take `db_url`, whose postgres side carries it", pytrace=False)
