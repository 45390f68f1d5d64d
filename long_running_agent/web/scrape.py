"""GET /metrics: Prometheus's text format (docs/operations.md says what each figure means and how to sum replicas).

Open on a development server; with METRICS_TOKEN set, only with `Authorization: Bearer <METRICS_TOKEN>`. Under
PRODUCTION_MODE it is served only when METRICS_TOKEN is set (gate.py), so a production server never shows its
figures to whoever can reach it.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from ..observability.metrics import CONTENT_TYPE, Metrics
from .api_errors import ApiError
from .routes import TheDesk


async def metrics_reader(request: Request, desk: TheDesk) -> None:
    """With METRICS_TOKEN set, the scraper must send it as a bearer token."""
    expected = desk.settings.metrics_token
    if expected is None:
        return
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected.encode()):
        raise ApiError(401, "missing_token", "/metrics needs the metrics token.",
                       "Send 'Authorization: Bearer <METRICS_TOKEN>' (Prometheus: the scrape job's "
                       "authorization.credentials); the token is set on the server as METRICS_TOKEN.")


async def the_metrics(request: Request) -> Metrics:
    metrics: Metrics = request.app.state.metrics
    return metrics


scraped = APIRouter(include_in_schema=False)


@scraped.get("/metrics", dependencies=[Depends(metrics_reader)])
async def metrics(desk: TheDesk, counted: Annotated[Metrics, Depends(the_metrics)]) -> Response:
    return Response(counted.render(await desk.ledger.figures.read()), media_type=CONTENT_TYPE)
