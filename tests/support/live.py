"""The real Gemini key and model for tests/integration, which the offline suite never sees.

tests/conftest.py takes GOOGLE_API_KEY / GEMINI_API_KEY out of the
environment so that no other test can reach Gemini, and keeps the value for
these; LIVE_GEMINI_API_KEY works too. LIVE_GEMINI_MODEL picks the model.
"""

from __future__ import annotations

import os
import sys

from long_running_agent.model.choice import GEMINI_DEFAULT


def live_key() -> str | None:
    saved = getattr(sys.modules.get("conftest"), "ORIGINAL_GEMINI_KEY", None)
    return (
        os.environ.get("LIVE_GEMINI_API_KEY")
        or saved
        or os.environ.get("GOOGLE_API_KEY")
        or os.environ.get("GEMINI_API_KEY")
    )


LIVE_KEY = live_key()
LIVE_MODEL = os.environ.get("LIVE_GEMINI_MODEL") or GEMINI_DEFAULT
NEEDS_KEY = "needs a Gemini key: set GOOGLE_API_KEY (or LIVE_GEMINI_API_KEY) to run"
