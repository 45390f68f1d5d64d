"""ADK's evaluation of the expense agent: the eval set and criteria beside this file, and the app they run against.

`adk eval long_running_agent/eval ...` and `AgentEvaluator.evaluate("long_running_agent.eval", ...)`
take the shipped app from this package's `agent`, unchanged; importing it teaches ADK's evaluator
the resume turns (resume_turns.py), as `adk eval` offers no other place to. No agent.py here:
`adk web` would list this folder as an app of its own. See docs/testing.md.

Run with (on a throwaway ledger):
    DEV_CHAT_APPROVAL=true EXPENSES_DATABASE_URL="sqlite+aiosqlite:///$(mktemp -d)/eval.db" \\
        .venv/bin/adk eval long_running_agent/eval long_running_agent/eval/expense.evalset.json
"""

from __future__ import annotations

# `adk eval` loads this folder as a top-level package, where `..` leads nowhere: import the app by name.
from long_running_agent import agent

from .resume_turns import use_in_adk_evaluator

use_in_adk_evaluator()

__all__ = ["agent"]
