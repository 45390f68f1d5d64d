"""The ledger's steps: each one a span in whatever trace runs it (ADK's tool call, an HTTP request, a CLI command).

A step carries the ticket's and the conversation's ids; its amount and purpose go on the span too, and leave the
process only when TRACE_CONTENT allows it (tracing.py). When a step ends, the `Watch` it ran on tells its listeners
(a server's metrics, metrics.py) what happened. Only OpenTelemetry's API is imported: without a tracer provider the
spans cost next to nothing, and `python main.py` starts no faster or slower.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context, trace

logger = logging.getLogger(__name__)

TRACER = "long_running_agent"
TICKET, SESSION = "expenses.ticket_id", "expenses.session_id"
# What a person wrote or asked for: on the app's spans, and cut from every exported span unless TRACE_CONTENT.
AMOUNT, PURPOSE = "expenses.amount", "expenses.purpose"
_IDS = context.create_key("expenses.ids")


@dataclass
class Step:
    """One ledger operation under way: its span, its ids and what it found (`facts`, for the metrics)."""

    name: str
    span: trace.Span
    ids: dict[str, str]
    facts: dict[str, Any] = field(default_factory=dict)

    def about(self, *, ticket: str | None = None, session: str | None = None) -> None:
        """The ticket's and the conversation's ids, once known (a ticket's id, once it is opened)."""
        for key, value in ((TICKET, ticket), (SESSION, session)):
            if value:
                self.ids[key] = value
                self.span.set_attribute(key, value)

    def note(self, *, amount: float | None = None, purpose: str | None = None, **facts: Any) -> None:
        """What the step found: statuses and outcomes (on the span too), an amount and purpose (content)."""
        self.facts.update(facts, **({"amount": amount} if amount is not None else {}))
        for key, value in ((AMOUNT, amount), (PURPOSE, purpose)):
            if value is not None:
                self.span.set_attribute(key, value)
        for key, value in facts.items():
            if isinstance(value, str | bool | int | float):
                self.span.set_attribute(f"expenses.{key}", value)


Listener = Callable[[Step], None]


class Watch:
    """Where steps run and are reported: one per desk, so each server's metrics hear only their own process."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    @contextmanager
    def step(self, name: str, *, ticket: str | None = None, session: str | None = None) -> Iterator[Step]:
        """Run a step as a span; its listeners hear of it if it ends without raising (a refusal is no event)."""
        with trace.get_tracer(TRACER).start_as_current_span(name) as span:
            step = Step(name, span, dict(current_ids()))
            step.about(ticket=ticket, session=session)
            token = context.attach(context.set_value(_IDS, step.ids))  # the logs of the step name its ids (logs.py)
            try:
                yield step
            finally:
                context.detach(token)
        for listener in self._listeners:
            try:
                listener(step)
            except Exception:  # a metric that cannot be counted never fails the step, which is done
                logger.warning("A listener of %s failed", name, exc_info=True)

    def tell(self, name: str, **facts: Any) -> None:
        """Report what happened as a step of its own, with no work in it (tickets found expired, say)."""
        with self.step(name) as step:
            step.note(**facts)


def current_ids() -> dict[str, str]:
    """The ids of the steps running now, for a log line: {"expenses.ticket_id": ..., "expenses.session_id": ...}."""
    ids = context.get_value(_IDS)
    return dict(ids) if isinstance(ids, dict) else {}
