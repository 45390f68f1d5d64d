"""ADK's evaluation of the expense agent: an eval set, its criteria, and the app they run against.

    expense.evalset.json  the cases: paid at once, waits for approval, approved and rejected resumes, no amount
    test_config.json      the criteria: the exact tool trajectory, arguments included
    agent.py              the app evaluated: the shipped one, as it is
    resume_turns.py       how the evaluator sends a resume turn: the pending call's id, scored apart

Run with (the model as the app picks it: AGENT_MODEL, else Gemini with a key, else
offline; on a throwaway ledger; see docs/testing.md):
    DEV_CHAT_APPROVAL=true EXPENSES_DATABASE_URL="sqlite+aiosqlite:///$(mktemp -d)/eval.db" \\
        .venv/bin/adk eval long_running_agent/eval long_running_agent/eval/expense.evalset.json
"""

from . import agent  # noqa: F401  (adk eval and AgentEvaluator read `app` and `root_agent` here)
