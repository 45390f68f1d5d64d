"""LOG_FORMAT=json: one JSON object per line, with the ticket's and the conversation's ids where a step knows them.

Each entry point calls `configure_logging` once, at its start (never on import). "text", the default, leaves logging
as it was: Python's, uvicorn's and ADK's own readable lines. "json" puts one handler on the root logger, and every
logger (uvicorn's access log too, which `make web` then leaves to it) writes through it. A line written inside a
ledger step (spans.py) names its ids, and, when a trace is recorded, the trace and span it belongs to.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal

from opentelemetry import trace

from .spans import SESSION, TICKET, current_ids

# How ADK's records of a model that failed are logged (model/failure.py): "once" (one paragraph, no traceback),
# "none" (the surface says it itself) or "tracebacks" (as ADK logs them). Unset: "tracebacks" if ADK logs at DEBUG,
# else "once".
ModelFailures = Literal["once", "none", "tracebacks"]
model_failures: ModelFailures | None = None


def log_model_failures(mode: ModelFailures) -> None:
    """How the rest of this process logs a model that failed (each entry point sets it once, at its start)."""
    global model_failures
    model_failures = mode


# The attributes every LogRecord has: anything else on a record came from `extra=` and is written too.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


class JsonLines(logging.Formatter):
    """A record as one line of JSON: time, level, logger, message, ids, trace, and the traceback if any."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname, "logger": record.name, "message": record.getMessage(),
        }
        ids = current_ids()
        for key, name in ((TICKET, "ticket_id"), (SESSION, "session_id")):
            if key in ids:
                line[name] = ids[key]
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            line["trace_id"], line["span_id"] = f"{span.trace_id:032x}", f"{span.span_id:016x}"
        line |= {key: value for key, value in vars(record).items() if key not in _STANDARD}
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


def configure_logging(log_format: str, *, level: int = logging.INFO) -> bool:
    """Write every log record as a JSON line on stderr if `log_format` is "json"; returns whether it did."""
    if log_format != "json":
        return False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    return True
