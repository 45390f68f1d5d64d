"""Expense agent with a human-approved, long-running tool (see README.md)."""

from dotenv import load_dotenv

load_dotenv()

from . import agent  # noqa: E402, F401  (adk web finds `app` and `root_agent` here)
