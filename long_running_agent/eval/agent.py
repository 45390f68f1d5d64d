"""The app ADK's evaluation runs: the shipped one, unchanged, with the evaluator taught its resume turns.

`adk eval long_running_agent/eval ...` and `AgentEvaluator.evaluate("long_running_agent.eval", ...)`
load this module. Importing it is what makes ADK's evaluator fill in the
pending call's id on a resume turn and score that turn on its own
(resume_turns.py): `adk eval` offers no other place to say so.
"""

from __future__ import annotations

# `adk eval long_running_agent/eval` loads this folder as a top-level package
# named "agent", where `..` leads nowhere: the app package is imported by name.
from long_running_agent.agent import app, root_agent

from .resume_turns import use_in_adk_evaluator

use_in_adk_evaluator()

__all__ = ["app", "root_agent"]
