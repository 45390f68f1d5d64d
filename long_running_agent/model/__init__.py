"""The models the agent can run: Gemini when configured, else the offline one (offline.py).

Importing this package registers the offline model's name with ADK, so an
agent can say `model="offline-expense-model"`.
"""

from . import offline  # noqa: F401  (registers the offline model with ADK)
