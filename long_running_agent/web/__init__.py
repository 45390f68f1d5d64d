"""The web surface: `make web`, one server for the dev UI, ADK's API and the approver inbox.

Run with:
    .venv/bin/python -m long_running_agent.web                  # http://127.0.0.1:8000
    .venv/bin/python -m long_running_agent.web --host 0.0.0.0   # other machines too (docs/deployment.md)
    .venv/bin/python -m long_running_agent.web --verbose        # ADK's tracebacks in the log too (docs/gemini.md)
"""

from .server import create_server, main

__all__ = ["create_server", "main"]
