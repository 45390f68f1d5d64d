"""The models the agent can run: Gemini when configured, else the offline one (offline.py)."""

from . import offline  # noqa: F401  (registers the offline model with ADK: `model="offline-expense-model"`)
