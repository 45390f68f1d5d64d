"""ADK's evaluation of the expense agent: an eval set, its criteria, and the app they run against.

    expense.evalset.json  the cases: paid at once, waits for approval, approved and rejected resumes, no amount
    test_config.json      the criteria: the exact tool trajectory, arguments included (ADK reads it beside the set)
    resume_turns.py       how the evaluator sends a resume turn: the pending call's id, scored apart

`adk eval long_running_agent/eval ...` and `AgentEvaluator.evaluate("long_running_agent.eval", ...)`
load this package and take the shipped app from its `agent`, unchanged; importing it
teaches ADK's evaluator the resume turns, as `adk eval` offers no other place to.
There is no agent.py here: `adk web` would list this folder as an app of its own.

Run with (the model as the app picks it: AGENT_MODEL, else Gemini with a key, else
offline; on a throwaway ledger; see docs/testing.md):
    DEV_CHAT_APPROVAL=true EXPENSES_DATABASE_URL="sqlite+aiosqlite:///$(mktemp -d)/eval.db" \\
        .venv/bin/adk eval long_running_agent/eval long_running_agent/eval/expense.evalset.json
"""

from __future__ import annotations

# `adk eval` loads this folder as a top-level package, where `..` leads nowhere: import the app by name.
from long_running_agent import agent

from .resume_turns import use_in_adk_evaluator

use_in_adk_evaluator()

__all__ = ["agent"]
