"""Expense agent with a human-approved, long-running tool (see README.md)."""

from dotenv import load_dotenv

load_dotenv()

# No `from . import agent`: importing the ledger, the settings or the CLI builds no agent. ADK's loader
# (`adk web`, `adk api_server`, `adk run`) imports `long_running_agent.agent` when the package has no `app`.
