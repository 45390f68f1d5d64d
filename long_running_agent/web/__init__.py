"""The web surface: `make web`, one server for the dev UI, ADK's API and the approver inbox.

Run with:
    .venv/bin/python -m long_running_agent.web                  # http://127.0.0.1:8000
    .venv/bin/python -m long_running_agent.web --port 8080
    .venv/bin/python -m long_running_agent.web --host 0.0.0.0   # other machines too (docs/deployment.md)
    .venv/bin/python -m long_running_agent.web --verbose        # ADK's tracebacks in the log too (docs/gemini.md)

    server.py            the server: ADK's FastAPI server plus what follows, and `main()`
    routes.py            the inbox page and the approvals API (an APIRouter)
    api_errors.py        the JSON error shape, and each refusal's status code
    json_errors.py       the middleware and handlers: every error of the server as that JSON
    adk_wording.py       ADK's own refusals (its origin checks, a resume it refuses), reworded
    database_errors.py   a database failure, classified: the request's data, a conflict, or an outage
    gate.py              user ids, the trusted identity header, production mode, body size
    security_headers.py  CSP and friends on the inbox and its API
    views.py             tickets, payouts and audit entries as JSON
"""

from .server import create_server, main

__all__ = ["create_server", "main"]
