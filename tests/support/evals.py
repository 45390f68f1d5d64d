"""`adk eval` as docs/testing.md shows it: the documented command, run in a fresh copy of the project."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .processes import ROOT
from .project import ADK, fresh_project, plain_env

TESTING_DOC = ROOT / "docs" / "testing.md"
EVAL_DIR = ROOT / "long_running_agent" / "eval"
EVAL_SET = EVAL_DIR / "expense.evalset.json"


def documented(kind: str, name: str) -> str:
    """The block that docs/testing.md marks `<!-- kind: name -->`."""
    found = re.search(rf"<!-- {kind}: {re.escape(name)} -->\n```\w+\n(.*?)```", TESTING_DOC.read_text(), re.S)
    assert found, f"docs/testing.md lost its {kind} {name!r}"
    return found.group(1)


def run_documented_adk_eval(name: str, directory: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The command marked `name`, as a user runs it from the project folder (`.venv/bin/adk` is this venv's)."""
    project = fresh_project(directory)
    command = documented("command", name).replace(".venv/bin/adk", str(ADK))
    # The copy is imported, not the work tree, and `mktemp -d` makes its ledger under `directory`.
    environment = plain_env(directory / "home", PYTHONPATH=str(project), TMPDIR=str(directory), **env)
    return subprocess.run(["bash", "-c", command], cwd=project, env=environment,
                          capture_output=True, text=True, timeout=600)
