"""The slow tests, marked by what they start, so that no one has to remember a marker (docs/testing.md).

- `postgres`: the `postgres` side of `db_url`, or anything of support/postgres.py
  (the session's server through `postgres_admin_url`, or a server of the test's own);
- `browser`: anything of Playwright (headless Chromium);
- `subprocess`: the `subprocess` module or asyncio's subprocesses: `python
  main.py`, `make web`, `adk`, a bash session of the docs.

A test gets the marks of what its body and its fixtures reach: the global
names each function reads, followed through every function and class of the
project (test modules, support, benchmarks, the package), never into a
library. `make test-fast` leaves the three out. A test that starts Python or
`adk` without the `subprocess` mark all the same fails and says so, so the
fast loop cannot slow down unnoticed.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Whatever lives in these modules (or below them) gives its mark to a test that reaches it.
LEAVES = {
    "subprocess": "subprocess",
    "asyncio.subprocess": "subprocess",
    "playwright": "browser",
    "support.postgres": "postgres",
}
PROGRAMS = ("python", "adk")  # what a test without the `subprocess` mark may not start


def _module_name(thing: Any) -> str:
    if isinstance(thing, types.ModuleType):
        return thing.__name__
    return getattr(thing, "__module__", None) or ""


def _leaf_mark(thing: Any) -> str | None:
    name = _module_name(thing)
    for module, mark in LEAVES.items():
        if name == module or name.startswith(module + "."):
            return mark
    return None


@functools.cache
def _in_project(module_name: str) -> bool:
    file = getattr(sys.modules.get(module_name), "__file__", None)
    if not file:
        return False
    path = Path(file).resolve()
    return path.is_relative_to(ROOT) and not {".venv", "site-packages"} & set(path.parts)


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """A code object and those nested in it (inner functions, lambdas, comprehensions)."""
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _codes(constant)


def _resolved(thing: Any) -> Any:
    thing = getattr(thing, "_fixture_function", thing)  # a @pytest.fixture function
    try:
        return inspect.unwrap(thing) if callable(thing) else thing
    except ValueError:  # a wrapper that wraps itself
        return None


class Reach:
    """The marks a function earns by what it reads, directly or through the project's own code."""

    def __init__(self) -> None:
        # id -> (the thing, its own marks, the project's functions and classes it reads)
        self._read: dict[int, tuple[Any, set[str], list[Any]]] = {}

    def marks(self, start: Any) -> set[str]:
        found: set[str] = set()
        seen: set[int] = set()
        todo = [_resolved(start)]
        while todo:
            thing = todo.pop()
            if id(thing) in seen:
                continue
            seen.add(id(thing))
            own, further = self._reads(thing)
            found |= own
            todo.extend(further)
        return found

    def _reads(self, thing: Any) -> tuple[set[str], list[Any]]:
        if id(thing) not in self._read:
            self._read[id(thing)] = (thing, *self._look(thing))
        _thing, own, further = self._read[id(thing)]
        return own, further

    def _look(self, thing: Any) -> tuple[set[str], list[Any]]:
        if (mark := _leaf_mark(thing)) is not None:
            return {mark}, []
        if not _in_project(_module_name(thing)) or _module_name(thing) == __name__:  # not this file's guard
            return set(), []
        read: list[Any] = []
        own: set[str] = set()
        if isinstance(thing, type):
            for cls in thing.__mro__:
                for member in vars(cls).values() if _in_project(cls.__module__) else ():
                    member = getattr(member, "__func__", member)  # staticmethod, classmethod
                    read.append(member.fget if isinstance(member, property) else member)
        elif isinstance(thing, types.FunctionType):
            for code in _codes(thing.__code__):
                for name in code.co_names:
                    if name in LEAVES:  # `import subprocess` inside the function
                        own.add(LEAVES[name])
                    value = thing.__globals__.get(name)
                    read.append(value)
                    if isinstance(value, types.ModuleType):
                        # `subprocess.run(...)`, `processes.run(...)`: the attributes read from a module.
                        read.extend(vars(value).get(attribute) for attribute in code.co_names)
        return own, [resolved for value in read
                       if (resolved := _resolved(value)) is not None
                       and (_leaf_mark(resolved) is not None or _in_project(_module_name(resolved)))]


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reach = Reach()
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        reached = reach.marks(item.function)
        for name in item.fixturenames:
            for definition in item._fixtureinfo.name2fixturedefs.get(name, ()):
                reached |= reach.marks(definition.func)
        for mark in sorted(reached):
            if item.get_closest_marker(mark) is None:
                item.add_marker(mark)


def _program(args: Any) -> str:
    first = args if isinstance(args, (str, bytes, Path)) else next(iter(args), "")
    first = first.decode() if isinstance(first, bytes) else str(first)
    return Path(first.split()[0] if first.strip() else "").name


@contextlib.contextmanager
def programs_started() -> Iterator[list[str]]:
    """The Python and `adk` processes started inside the block, by name."""
    started: list[str] = []
    real = subprocess.Popen

    class Watched(real):  # type: ignore[valid-type,misc]
        def __init__(self, args: Any, *rest: Any, **options: Any) -> None:
            program = _program(args)
            if program.startswith(PROGRAMS):
                started.append(program)
            super().__init__(args, *rest, **options)

    subprocess.Popen = Watched  # type: ignore[misc]
    try:
        yield started
    finally:
        subprocess.Popen = real  # type: ignore[misc]


@pytest.fixture(autouse=True)
def _starts_no_program_unmarked(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that starts Python or `adk` yet is not marked `subprocess`: it would slow the fast loop."""
    if request.node.get_closest_marker("subprocess") is not None:
        yield
        return
    with programs_started() as started:
        yield
    if started:
        pytest.fail(f"this test started {', '.join(sorted(set(started)))} in another process without the "
                    "`subprocess` mark; add @pytest.mark.subprocess (tests/support/markers.py)", pytrace=False)
