"""ADK's evaluation of the expense agent: an eval set, its criteria, and the app they run against.

    expense.evalset.json  the cases: paid at once, waits for approval, approved and rejected resumes, no amount
    test_config.json      the criteria: the exact tool trajectory, arguments included; ADK reads the
                          test_config.json beside an eval set, in `adk eval` and AgentEvaluator alike
    resume_turns.py       how the evaluator sends a resume turn: the pending call's id, scored apart

`adk eval long_running_agent/eval ...` and `AgentEvaluator.evaluate("long_running_agent.eval", ...)`
load this package and take the shipped app from its `agent`, unchanged. Importing
it is what makes ADK's evaluator fill in the pending call's id on a resume turn
and score that turn on its own: `adk eval` offers no other place to say so.
There is no agent.py here: `adk web` lists every folder below it that has one
as an app of its own, and this is the same app.

Run with (the model as the app picks it: AGENT_MODEL, else Gemini with a key, else
offline; on a throwaway ledger; see docs/testing.md):
    DEV_CHAT_APPROVAL=true EXPENSES_DATABASE_URL="sqlite+aiosqlite:///$(mktemp -d)/eval.db" \\
        .venv/bin/adk eval long_running_agent/eval long_running_agent/eval/expense.evalset.json
"""

from __future__ import annotations

# `adk eval long_running_agent/eval` loads this folder as a top-level package
# named "agent", where `..` leads nowhere: the app package is imported by name.
from long_running_agent import agent

from .resume_turns import use_in_adk_evaluator

use_in_adk_evaluator()

__all__ = ["agent"]
