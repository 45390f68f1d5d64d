"""The Prometheus figures of `GET /metrics` (docs/operations.md): some from the database, some from this process.

From the database, read at each scrape (`gauges`, the ledger's figures.py): the same on every replica, so take one
replica's value (`max`), never the sum. From this process: counters and histograms of what its own ledger steps did
(spans.py's `Watch`), and its HTTP requests (http.py); sum them over replicas. Each server owns its registry, so
servers in one process (tests) never count each other's work.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ..names import TicketStatus
from .spans import Step, Watch

CONTENT_TYPE = CONTENT_TYPE_LATEST
# Read from the database at each scrape; ledger/figures.py returns a value for each.
GAUGES = {
    "pending_tickets": "Tickets waiting for an approver (the ledger's kept count; the same on every replica).",
    "oldest_pending_seconds": "How long the oldest pending ticket has waited, in seconds (0 with none).",
    "outbox_pending": "Notifications not yet sent nor given up (the webhook outbox).",
    "paid_today_dollars": "Dollars paid out since 00:00 UTC, with or without approval.",
}
# From a request to its decision: minutes to days (APPROVAL_TTL_HOURS is 72 by default).
DECISION_BUCKETS = (60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400, 2 * 86400, 3 * 86400, 7 * 86400)
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# Every label takes its values from a fixed set, whatever a client sends: a value from outside it counts as OTHER,
# so that made-up methods, statuses or channels cannot add a series each (and grow the scrape without bound).
OTHER = "other"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
STATUSES = frozenset(str(status.value) for status in HTTPStatus)
OUTCOMES = frozenset(TicketStatus)
CHANNELS = frozenset({"api", "inbox", "cli", "slack", "chat", "a2a", "sweep", "ledger", "unknown"})


def one_of(known: frozenset[str], value: object) -> str:
    """`value` as a label: itself if it is one of `known`, else OTHER."""
    return value if isinstance(value, str) and value in known else OTHER


class Metrics:
    """One server's registry: the database's gauges, and what its own steps and requests did."""

    def __init__(self, watch: Watch) -> None:
        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        self.gauges = {name: Gauge(f"expenses_{name}", text, registry=registry) for name, text in GAUGES.items()}
        self.decisions = Counter("expenses_decisions", "Decisions this process made, by outcome and channel.",
                                 ["outcome", "channel"], registry=registry)
        self.decision_seconds = Histogram("expenses_decision_seconds", "From a request to its decision, in seconds.",
                                          buckets=DECISION_BUCKETS, registry=registry)
        self.payouts = Counter("expenses_payouts", "Payouts this process made.", registry=registry)
        self.paid = Counter("expenses_paid_dollars", "Dollars this process paid out.", registry=registry)
        self.deliveries_failed = Counter("expenses_deliveries_failed",
                                         "Failed deliveries of a decision to its conversation, recorded here.",
                                         registry=registry)
        self.outbox_failed = Counter("expenses_outbox_failed", "Webhook attempts that failed, sent from here.",
                                     registry=registry)
        self.http = Histogram("expenses_http_request_duration_seconds", "HTTP requests, by route and status.",
                              ["method", "route", "status"], buckets=HTTP_BUCKETS, registry=registry)
        watch.listen(self.heard)

    def heard(self, step: Step) -> None:
        """Count what a ledger step did (its facts; spans.py)."""
        facts = step.facts
        if outcome := facts.get("outcome"):
            self.decisions.labels(one_of(OUTCOMES, outcome), one_of(CHANNELS, facts.get("channel", "unknown"))).inc(
                facts.get("count", 1))
            if (waited := facts.get("waited_seconds")) is not None:
                self.decision_seconds.observe(waited)
        if facts.get("paid"):
            self.payouts.inc()
            self.paid.inc(facts.get("amount", 0))
        if facts.get("delivery_failed"):
            self.deliveries_failed.inc()
        if facts.get("sent") is False:
            self.outbox_failed.inc()

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        """Time one HTTP request; `route` is the route it matched (a template, so one of the app's few) or
        "unmatched"."""
        self.http.labels(one_of(METHODS, method), route, one_of(STATUSES, str(status))).observe(seconds)

    def render(self, gauges: Mapping[str, float]) -> bytes:
        """The text a scrape gets: the database's figures as just read, then the counters as they stand."""
        for name, value in gauges.items():
            self.gauges[name].set(value)
        return generate_latest(self.registry)
