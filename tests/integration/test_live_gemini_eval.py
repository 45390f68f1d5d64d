"""The eval set (long_running_agent/eval/) against the real Gemini API, with `adk eval`; skipped without a key.

It runs the `adk eval` command that docs/testing.md shows for Gemini, in a
fresh copy of the project, and expects every case to pass: the tool
trajectory of each turn, arguments included (see docs/testing.md).

Run with:
    GOOGLE_API_KEY=... .venv/bin/python -m pytest tests/integration/test_live_gemini_eval.py -q
    LIVE_GEMINI_MODEL=gemini-2.5-flash GOOGLE_API_KEY=... .venv/bin/python -m pytest tests/integration -q

The key: tests/support/live.py.
"""

from __future__ import annotations

import pytest
from support.evals import documented, run_documented_adk_eval
from support.live import LIVE_KEY, LIVE_MODEL, NEEDS_KEY

pytestmark = [pytest.mark.subprocess, pytest.mark.skipif(not LIVE_KEY, reason=NEEDS_KEY)]


def test_live_gemini_passes_the_eval_set_with_adk_eval(tmp_path):
    result = run_documented_adk_eval(
        "adk eval, Gemini", tmp_path, GOOGLE_API_KEY=LIVE_KEY or "", AGENT_MODEL=LIVE_MODEL
    )

    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    assert documented("output", "adk eval") in result.stdout
