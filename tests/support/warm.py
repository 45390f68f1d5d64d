"""The app's server and approver commands in a process of their own, forked from a parent that has ADK imported.

A new interpreter spends most of its start importing google-genai, ADK, SQLAlchemy and FastAPI before the app
runs a line, and the tests start dozens of servers and commands. multiprocessing's forkserver imports those
libraries once per test process (`PRELOAD`, none of the app's own modules); each process forks from it, takes
the environment, folder and arguments it is given, and runs the program's own entry point as `python -m` would,
exiting as the interpreter does (threads joined, atexit handlers run, streams flushed). It is a real process:
its own memory, pid and database connections, killed and raced like any other. What only a new interpreter
shows (what it imports, what it reads from `.env` or the shell at start) is tested with `subprocess`.
"""

from __future__ import annotations

import atexit
import gc
import io
import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

# Libraries only: the app's modules read their settings when they load, so each process loads them itself.
PRELOAD = ["google.genai.types", "google.adk.cli.fast_api", "google.adk.runners", "sqlalchemy.ext.asyncio",
           "aiosqlite", "uvicorn", "httpx", "pydantic_settings"]
_forkserver = multiprocessing.get_context("forkserver")
_forkserver.set_forkserver_preload(PRELOAD)


class Process:
    """A forked process, with the part of `subprocess.Popen` the tests use."""

    def __init__(self, args: list[str], child: multiprocessing.process.BaseProcess) -> None:
        self.args, self._child = args, child

    @property
    def pid(self) -> int:
        assert self._child.pid is not None
        return self._child.pid

    @property
    def returncode(self) -> int | None:
        return self._child.exitcode  # negative for a signal, as Popen's

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._child.join(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def terminate(self) -> None:
        self._child.terminate()

    def kill(self) -> None:
        self._child.kill()


def start(module: str, args: list[str], *, env: dict[str, str], cwd: Path, out: Path, err: Path | None = None,
          argv0: str | None = None) -> Process:
    """`python -m module *args` in `cwd` with exactly `env`, its output appended to `out` (and `err`, else `out`).

    `argv0` is what the program sees as its name (a console script's path); by default the module's file.
    """
    child = _forkserver.Process(target=_main, args=(module, args, env, str(cwd), str(out), str(err or out), argv0),
                                name=module)
    child.start()
    return Process([sys.executable, "-m", module, *args], child)


def run(module: str, args: list[str], *, env: dict[str, str], cwd: Path, timeout: float = 120,
        argv0: str | None = None) -> subprocess.CompletedProcess[str]:
    """`start`, waited for, as `subprocess.run(..., capture_output=True, text=True)` returns it."""
    with tempfile.TemporaryDirectory() as scratch:
        out, err = Path(scratch, "out"), Path(scratch, "err")
        out.touch()
        err.touch()
        process = start(module, args, env=env, cwd=cwd, out=out, err=err, argv0=argv0)
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        return subprocess.CompletedProcess(process.args, code, out.read_text(), err.read_text())


def _main(module: str, args: list[str], env: dict[str, str], cwd: str, out: str, err: str, argv0: str | None
          ) -> None:
    """In the forked process: become `python -m module *args`, run it, and exit as the interpreter would."""
    gc.freeze()  # what the parent imported is never garbage: kept out of this process's collections (it costs nothing)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.path[0] = cwd  # python -m puts the folder it starts in first
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    for fd, path in ((1, out), (2, err)):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND), fd)
    sys.stdout = _stream(1, line_buffered=unbuffered, unbuffered=unbuffered)
    sys.stderr = _stream(2, line_buffered=True, unbuffered=unbuffered)
    code = 0
    try:
        if argv0 is None:
            sys.argv = ["-m", *args]
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [argv0, *args]
            runpy.run_module(module, run_name="__main__")
    except SystemExit as stop:
        if isinstance(stop.code, int) or stop.code is None:
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # the interpreter's own exit: non-daemon threads end first
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _stream(fd: int, *, line_buffered: bool, unbuffered: bool) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BufferedWriter(io.FileIO(fd, "w", closefd=False)), encoding="utf-8",
                            errors="backslashreplace", line_buffering=line_buffered, write_through=unbuffered)
