"""Every variable the app reads, so that tests/conftest.py can clear them all.

`Settings` reads one variable per field, its alias; `model_settings()` reads
the Gemini variables below (google-genai reads them too). tests/test_environment.py
fails when settings.py reads a name that is not here.
"""

from __future__ import annotations

import os

from long_running_agent.settings import Settings

# Read by settings.py's model_settings(), _gemini_credentials() and _gemini_address(), outside `Settings`.
MODEL_VARIABLES = (
    "AGENT_MODEL", "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE",
)


def app_variables() -> set[str]:
    return {field.alias for field in Settings.model_fields.values() if field.alias} | set(MODEL_VARIABLES)


def clear_app_variables() -> None:
    """Set every variable the app reads to "", which it takes for unset.

    Empty rather than removed: a process a test starts loads `.env` again
    (long_running_agent/__init__.py), and load_dotenv only fills in variables
    that are not set at all.
    """
    for name in app_variables():
        os.environ[name] = ""
