"""Each HTTP request's duration, by the route it matched and its status (expenses_http_request_duration_seconds).

The route is the one the request matched (`/api/approvals/{ticket_id}/approve`), never the path itself, so ids do not
multiply the series; a request that matched none (refused by the gate, or unknown) counts as "unmatched", and a
method or status outside the known ones as "other" (metrics.py). Its span
is FastAPI's own: FastAPI starts one for each request, continuing a caller's `traceparent`, once a tracer provider is
set, and the ledger's and ADK's spans nest in it.
"""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .metrics import Metrics


class RequestMetrics:
    """ASGI middleware, outermost, so that it times every other layer too."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # what a request that fails before answering counts as
        started = time.perf_counter()

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.request(scope["method"], route, status, time.perf_counter() - started)
