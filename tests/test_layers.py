"""The package's layers: nothing below the agent imports it, and no module imports its way back up.

`make test` runs import-linter on the contracts in pyproject.toml ([tool.importlinter]); these
tests run the same check, and show what the layering buys a reader.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.processes import ROOT

from long_running_agent import names, tools


@pytest.mark.subprocess
@pytest.mark.parametrize("module", [
    "long_running_agent.ledger", "long_running_agent.settings", "long_running_agent.desk",
    # The `expenses` CLI: its parser (entry.py imports the agent only once the settings are good), commands, output.
    "long_running_agent.cli.entry", "long_running_agent.cli.commands", "long_running_agent.cli.render",
])
def test_importing_a_lower_layer_builds_no_agent(module):
    probe = (f"import sys, {module}; "
             "print(sorted(m for m in sys.modules if m in ('long_running_agent.agent', 'long_running_agent.tools')))")
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"importing {module} imported {result.stdout.strip()}"


@pytest.mark.subprocess
def test_the_import_contracts_hold():
    pytest.importorskip("importlinter", reason="pip install -e '.[dev]' installs import-linter")
    check = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    result = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_shared_names_are_the_tools_own():
    # ADK declares a tool by its function's name; the guard and the ledger know it by these.
    assert (names.APPROVAL_TOOL, names.REIMBURSE_TOOL, names.WITHDRAW_TOOL) == (
        tools.ask_for_approval.__name__, tools.reimburse.__name__, tools.withdraw_request.__name__)
