"""The tests' environment: nothing of a developer's shell or `.env` reaches a test.

Every variable the app reads (tests/support/environment.py, from the settings
class) is cleared here, before any test or fixture reads a setting. The
fixtures every module shares live in tests/support/fixtures.py, those of the
Slack tests in tests/support/slack_approvals.py, the guard that keeps
`make test-fast` fast in tests/support/markers.py, and what keeps a test
process's garbage collections cheap in tests/support/heap.py; all four load
from here as plugins, the Slack ones where the slack extra is installed (`make
test-adk`'s core suite runs without it).
"""

from __future__ import annotations

import importlib.util
import os

# Saved for tests/integration, then cleared so nothing here, and no process a
# test starts, can reach Gemini. Read before the package loads `.env`: a key kept
# there never makes `make test` call Gemini.
ORIGINAL_GEMINI_KEY = os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY")

from support.environment import clear_app_variables  # noqa: E402  (imports the package, which loads .env)

clear_app_variables()

# Loaded after the line above: the fixtures read the settings of a cleared environment.
pytest_plugins = ["support.fixtures", "support.markers", "support.heap", "pytester"]
if importlib.util.find_spec("slack_sdk") is not None:
    pytest_plugins.append("support.slack_approvals")
