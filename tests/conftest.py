"""The tests' environment: nothing of a developer's shell or `.env` reaches a test.

The fixtures every module shares live in tests/support/fixtures.py, and the
marks that keep the slow tests out of `make test-fast` are given in
tests/support/markers.py; both load from here as plugins.
"""

from __future__ import annotations

import os

# Saved for tests/integration, then removed so nothing here, and no process a
# test starts, can reach Gemini or read a developer's settings.
ORIGINAL_GEMINI_KEY = os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY")

import long_running_agent  # noqa: E402,F401  (loads .env; cleared below)

for _name in (
    "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE",
    "GOOGLE_CLOUD_PROJECT", "AGENT_MODEL",
    "EXPENSES_DATABASE_URL", "APPROVAL_THRESHOLD", "MAX_REIMBURSEMENT", "APPROVAL_TTL_HOURS",
    "DEV_CHAT_APPROVAL", "APPROVERS", "DAILY_AUTO_APPROVAL_LIMIT", "EXPIRY_SWEEP_SECONDS",
    "TRUSTED_USER_HEADER", "PRODUCTION_MODE", "AUTO_MIGRATE", "DUAL_APPROVAL_ABOVE", "APPROVAL_WEBHOOK_URL",
    "APPROVAL_WEBHOOK_SECRET", "APPROVAL_WEBHOOK_TIMEOUT_SECONDS", "APPROVAL_REMIND_BEFORE_HOURS", "ESCALATE_TO",
):
    os.environ.pop(_name, None)

# Loaded after the lines above: the fixtures read the settings of a cleared environment.
pytest_plugins = ["support.fixtures", "support.markers"]
