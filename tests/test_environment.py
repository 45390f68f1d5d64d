"""No setting of a developer's shell or `.env` reaches a test, nor a process a test starts.

tests/conftest.py sets every variable the app reads to "" (support/environment.py
lists them, from the settings class); these check that the list is complete
and that the suite runs in a clone whose `.env` turns Slack approvals on, as
docs/slack.md has developers do.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest
from support.environment import app_variables
from support.processes import ROOT
from support.project import cloned_project

PACKAGE = ROOT / "long_running_agent"
VARIABLE = re.compile(r"[A-Z][A-Z0-9_]+")  # a string in capitals: how the app's variables are spelled
SHOW_SETTINGS = ("from long_running_agent.settings import load_settings; s = load_settings(); "
                 "print(s.slack, s.approvers, s.webhook_url, s.model.agent_model, s.model.gemini_credentials)")


def test_every_variable_settings_py_names_is_cleared():
    tree = ast.parse((PACKAGE / "settings.py").read_text())
    named = {node.value for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and VARIABLE.fullmatch(node.value)}
    # A field's alias, an os.getenv argument, a name in a tuple of names: the scan sees each kind.
    assert {"SLACK_BOT_TOKEN", "GOOGLE_CLOUD_LOCATION", "GOOGLE_GENAI_USE_ENTERPRISE"} <= named
    missing = named - app_variables()
    assert missing == set(), f"settings.py reads {sorted(missing)}: list them in tests/support/environment.py"


def test_no_other_module_of_the_package_reads_the_environment():
    readers = [str(path.relative_to(ROOT)) for path in PACKAGE.rglob("*.py")
               if path.name != "settings.py" and re.search(r"\bgetenv\b|\benviron\b", path.read_text())]
    assert readers == [], "read settings in settings.py, where tests/conftest.py finds them"


def test_every_variable_the_app_reads_is_empty_in_the_tests():
    assert {name: os.environ.get(name) for name in app_variables() if os.environ.get(name) != ""} == {}


@pytest.mark.subprocess
def test_a_process_a_test_starts_reads_no_setting_from_dotenv():
    shown = subprocess.run([sys.executable, "-c", SHOW_SETTINGS], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == ["False", "{}", "None", "None", "None"]


def slack_dotenv() -> str:
    """docs/slack.md's `.env`, its placeholders filled in, and a Gemini key and model as the README's."""
    [block] = re.findall(r"In `\.env`:\n\n\s*```ini\n(.*?)```", (ROOT / "docs" / "slack.md").read_text(), re.S)
    lines = [re.sub(r"<[^>]*>", "5e1f" * 8, line.strip()) for line in block.splitlines() if line.strip()]
    assert {"APPROVERS", "APPROVAL_WEBHOOK_URL", "APPROVAL_WEBHOOK_SECRET", "SLACK_SIGNING_SECRET",
            "SLACK_APPROVERS", "SLACK_BOT_TOKEN"} <= {line.partition("=")[0] for line in lines}
    return "\n".join([*lines, "GOOGLE_API_KEY=not-a-real-key", "AGENT_MODEL=gemini-3.5-flash", ""])


@pytest.mark.subprocess
def test_a_dotenv_with_the_slack_settings_leaves_the_suite_runnable(tmp_path):
    project = cloned_project(tmp_path)
    (project / ".env").write_text(slack_dotenv())
    # A developer's shell: nothing set but what `.env` holds, and no trace of this pytest run.
    env = {k: v for k, v in os.environ.items() if k not in app_variables() and not k.startswith("PYTEST_")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], cwd=project, env=env, capture_output=True, text=True,
                              timeout=600)

    shown = run("-c", SHOW_SETTINGS)
    assert shown.stdout.split()[:1] == ["True"], shown.stdout + shown.stderr  # the .env is read: Slack is on
    # Every module collected; this module's other checks run: every variable empty in a test, and in a process
    # it starts from the clone.
    passed = run("-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "test_environment and not runnable")
    assert passed.returncode == 0 and re.search(r"\b4 passed, \d+ deselected", passed.stdout), passed.stdout[-5000:]
