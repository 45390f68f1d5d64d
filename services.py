"""ADK's hook for this folder: plain `adk web` / `adk api_server` load it to register session stores.

With `--session_service_uri` set to a SQLAlchemy URL (as docs/deployment.md
suggests: the app's own database), ADK keeps conversations in
`long_running_agent/checked_sessions.py`'s store: ids and text its tables
cannot hold are refused before the database sees them, and its errors reach
ADK's answers without SQL. Without the flag ADK keeps its own SQLite file,
which stores such values and whose errors carry no SQL.
"""

from google.adk.cli.service_registry import get_service_registry

from long_running_agent.checked_sessions import checked_sessions

for scheme in ("postgresql+asyncpg", "sqlite+aiosqlite"):
    get_service_registry().register_session_service(scheme, checked_sessions)
