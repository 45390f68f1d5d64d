"""The `expenses` approver CLI and the demo run in the test's own process: their `main(argv)`, on the settings a
process would read.

For tests of what a command does (its rules, its words, its exit status), where the process around it is
not the point: a new process costs Python's and ADK's start-up, and a test that runs a dozen
commands pays it a dozen times. `processes.run` starts the real `.venv/bin/expenses`, and the tests that
check what only a process shows (its environment, `.env`, a kill, two processes racing) keep using it.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import logging
import os
import subprocess
import warnings
from collections.abc import Callable, Iterator
from types import ModuleType

from long_running_agent.cli.entry import main
from long_running_agent.observability import logs

from .models import OFFLINE
from .processes import ROOT, pending_ticket
from .sources import from_file


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """The variables `processes.run` gives the process, for the duration of one command."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _stderr_of_a_process(err: io.StringIO) -> Iterator[None]:
    """Log records and warnings written to `err`, as a new process with no logging set up writes them to stderr."""
    handler = logging.StreamHandler(err)
    handler.setLevel(logging.WARNING)  # Python's last-resort handler: warnings and worse
    logging.getLogger().addHandler(handler)
    logging_mode = logs.model_failures  # main() sets how model failures are logged, for the whole process
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")  # each shown once, as in a new process (not hidden by earlier tests)
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: err.write(
                warnings.formatwarning(message, category, filename, lineno, line))
            yield
    finally:
        logging.getLogger().removeHandler(handler)
        logs.model_failures = logging_mode


def expenses(*args: str, url: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`expenses *args` on the database at `url`, as `processes.run` returns it: exit status, stdout, stderr."""
    return _as_a_process(main, ["expenses", *args], url=url, env=env)


def demo(*args: str, url: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python main.py *args` on the database at `url`, as `processes.run` returns it."""
    return _as_a_process(_main_py().main, ["main.py", *args], url=url, env=env)


@functools.cache
def _main_py() -> ModuleType:
    return from_file("main_py", ROOT / "main.py")


def _as_a_process(entry: Callable[[list[str]], int], argv: list[str], *, url: str, env: dict[str, str] | None
                  ) -> subprocess.CompletedProcess[str]:
    out, err = io.StringIO(), io.StringIO()
    variables = {"EXPENSES_DATABASE_URL": url, "AGENT_MODEL": OFFLINE} | (env or {})
    with _environment(variables), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            _stderr_of_a_process(err):
        try:
            status = entry(argv[1:])
        except SystemExit as stopped:  # argparse, on arguments it cannot parse (or --help)
            status = stopped.code if isinstance(stopped.code, int) else 0 if stopped.code is None else 1
    if variables["AGENT_MODEL"] != OFFLINE:
        # Gemini's clients are collected now, with no event loop running, as a process's exit would end them: not
        # later, inside the next command's loop (google-genai's clients close themselves on the loop they find).
        gc.collect()
    return subprocess.CompletedProcess(argv, status, out.getvalue(), err.getvalue())


def request_ticket(url: str, text: str = "Please reimburse $250 for the team lunch") -> str:
    """alice's request through `expenses request`; the id of the ticket it leaves pending."""
    return pending_ticket(expenses("request", text, "--user", "alice", url=url))
