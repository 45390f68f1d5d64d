"""A requester's agent handing reimbursements to the expense agent over A2A: `.venv/bin/adk web examples` lists it."""

from . import agent  # noqa: F401  (ADK's loader finds `root_agent` in it)
