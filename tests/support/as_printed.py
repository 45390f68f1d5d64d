"""A command as the docs or the CLI print it, run as a plain shell in the project folder runs it.

bash reads its words (quotes, `$'…'`, `NAME=value` settings before the program); the program must be one that
shell finds; `.venv/bin/expenses` and `.venv/bin/python main.py` then run in the test's process (`support.cli`),
on the project's own database, and anything else in bash. A new Python process pays ADK's start-up, so
the tests that check every printed command run only each program's first one as a real process of that bash, which
shows the shell finds the program and the program the project (`run_each`).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from . import cli
from .environment import app_variables

SETTING = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def run_each(commands: list[str], project: Path, env: dict[str, str]
             ) -> Iterator[tuple[str, subprocess.CompletedProcess[str]]]:
    """Each command and how it ended, in order: each program's first in a new bash (`in_bash`), the others `run`."""
    started = set()
    for command in commands:
        _settings, words = bash_words(command, project)
        program = " ".join(words[:2]) if words[:2] == [".venv/bin/python", "main.py"] else words[0]
        yield command, (run if program in started else in_bash)(command, project, env)
        started.add(program)


def bash_words(command: str, project: Path) -> tuple[dict[str, str], list[str]]:
    """The settings before the program and the words after them, as bash reads `command` in `project`."""
    said = subprocess.run(["bash", "-c", f"set -- {command}\nprintf '%s\\0' \"$@\""], cwd=project,
                          capture_output=True, text=True, check=True)
    words = said.stdout.split("\0")[:-1]
    settings = {}
    while words and SETTING.match(words[0]):
        name, value = words.pop(0).split("=", 1)
        settings[name] = value
    return settings, words


def run(command: str, project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`command` as bash in `project` with `env` runs it, the project's own programs in this process."""
    settings, (program, *args) = bash_words(command, project)
    if program.startswith(".venv/bin/") and not os.access(project / program, os.X_OK):
        return subprocess.CompletedProcess(command, 127, "", f"bash: {program}: No such file or directory\n")
    variables = {name: value for name, value in (env | settings).items() if name in app_variables()}
    # The project's default database is its own .data/expenses.db: named here, since this process's package is
    # the one being tested, not the copy in `project`.
    url = variables.pop("EXPENSES_DATABASE_URL", "") or f"sqlite+aiosqlite:///{project}/.data/expenses.db"
    with contextlib.chdir(project):
        if program == ".venv/bin/expenses":
            return cli.expenses(*args, url=url, env=variables)
        if program == ".venv/bin/python" and args[:1] == ["main.py"]:
            return cli.demo(*args[1:], url=url, env=variables)
    return in_bash(command, project, env)


def in_bash(command: str, project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`command` in a new bash in `project`: the real programs, each its own process."""
    return subprocess.run(["bash", "-c", command], cwd=project, env=env, capture_output=True, text=True,
                          timeout=300)
