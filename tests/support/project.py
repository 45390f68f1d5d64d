"""A fresh copy of the project, run the way a new user runs it: plain `adk` commands, no flags.

The copy lives in a temporary folder, so ADK's per-agent session file
(`long_running_agent/.adk/session.db`) and the default ledger
(`.data/expenses.db`) are created there and not in the working tree. Python
imports the copied package, since ADK and `python main.py` put the project
folder first on `sys.path`.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .processes import ROOT
from .servers import answers, free_port

ADK = Path(sys.executable).with_name("adk")


def fresh_project(directory: Path) -> Path:
    """Copy the package and main.py into `directory`, as a clone would have them."""
    project = directory / "project"
    shutil.copytree(ROOT / "long_running_agent", project / "long_running_agent",
                    ignore=shutil.ignore_patterns(".adk", "__pycache__", ".data"))
    shutil.copy(ROOT / "main.py", project / "main.py")
    return project


def made_venv(project: Path) -> None:
    """`project/.venv` as `make demo` leaves it in a clone: this virtualenv, with `expenses` on the copy.

    Everything is this virtualenv's own but `bin/expenses`, which pip writes for [project.scripts]: here it
    imports the package of the folder it runs from (the copy), as the clone's own install would.
    """
    venv, own = project / ".venv", Path(sys.executable).parent.parent
    venv.mkdir()
    for entry in own.iterdir():
        if entry.name != "bin":
            (venv / entry.name).symlink_to(entry)
    (venv / "bin").mkdir()
    for program in (own / "bin").iterdir():
        if program.name != "expenses":
            (venv / "bin" / program.name).symlink_to(program)
    script = venv / "bin" / "expenses"
    script.write_text(f"#!/bin/sh\nexec {venv}/bin/python -c 'import sys; from long_running_agent.cli.entry "
                      "import main; sys.argv[0] = \"expenses\"; sys.exit(main())' \"$@\"\n")
    script.chmod(0o755)


def _ignored_names(root: Path = ROOT) -> list[str]:
    """The .gitignore patterns that name a file or a folder anywhere in the tree (`.adk/`, `*.db`)."""
    patterns = [line.strip().rstrip("/") for line in (root / ".gitignore").read_text().splitlines()]
    # A pattern naming a path inside a folder (benchmarks/results/raw/) is left to that folder's tests.
    return [pattern for pattern in patterns if pattern and not pattern.startswith("#") and "/" not in pattern]


def ignored_by_git(path: Path, root: Path = ROOT) -> bool:
    """Whether .gitignore leaves `path` out of a clone: what ADK and the tests write at run time."""
    names = _ignored_names(root)
    return any(fnmatch.fnmatch(part, name) for part in path.relative_to(root).parts for name in names)


def cloned_project(directory: Path) -> Path:
    """Copy the whole project folder into `directory` as a clone has it: nothing .gitignore leaves out."""
    project = directory / "clone"
    shutil.copytree(ROOT, project, ignore=shutil.ignore_patterns(".git", *_ignored_names()))
    return project


def plain_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a user with no .env and no Gemini key."""
    (home / ".adk").mkdir(parents=True, exist_ok=True)
    # Answers the dev UI's telemetry question, so its consent dialog stays closed.
    (home / ".adk" / "config.json").write_text(json.dumps({"telemetry": False}))
    env = {k: v for k, v in os.environ.items()
           if k not in {"EXPENSES_DATABASE_URL", "AGENT_MODEL", "APPROVERS", "APPROVAL_TTL_HOURS"}}
    return env | {"HOME": str(home), "PYTHONUNBUFFERED": "1"} | extra


@dataclass
class PlainServer:
    base_url: str
    project: Path
    log: Path


@contextmanager
def plain_adk(command: str, project: Path, home: Path, *flags: str,
              env: dict[str, str] | None = None) -> Iterator[PlainServer]:
    """`adk web` or `adk api_server`, started from the project folder with no flags but a port (in `env`, or
    plain_env's)."""
    log = project.parent / f"{command}.log"
    for _attempt in range(3):
        port = free_port()
        with log.open("w") as out:
            process = subprocess.Popen([str(ADK), command, "--port", str(port), *flags], cwd=project,
                                       env=env or plain_env(home), stdout=out, stderr=subprocess.STDOUT)
        base_url = f"http://127.0.0.1:{port}"
        try:
            if answers(process, f"{base_url}/list-apps"):
                break
            if process.poll() is None:
                raise AssertionError(f"adk {command} did not answer within 60 s:\n{log.read_text()[-3000:]}")
            if "address already in use" not in log.read_text().lower():
                raise AssertionError(f"adk {command} exited early:\n{log.read_text()[-3000:]}")
        except BaseException:
            _stop(process)
            raise
        # Another test's process took the free port before adk bound it: another one.
    else:
        raise AssertionError(f"no free port for adk {command}:\n{log.read_text()[-3000:]}")
    try:
        yield PlainServer(base_url, project, log)
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def expenses(project: Path, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The `expenses` command in the copied project, as its user runs it (the copy's own package)."""
    return subprocess.run([sys.executable, "-m", "long_running_agent.cli", *args], cwd=project,
                          env=plain_env(home, **env), capture_output=True, text=True, timeout=120)


def demo(project: Path, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python main.py ...` (the demo) in the copied project, as its user runs it."""
    return subprocess.run([sys.executable, "main.py", *args], cwd=project, env=plain_env(home, **env),
                          capture_output=True, text=True, timeout=120)


def ticket_in(text: str) -> str:
    match = re.search(r"Ticket (T-[0-9a-f]+) is waiting for an approver", text)
    assert match, text
    return match.group(1)
