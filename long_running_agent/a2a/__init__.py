"""The expense agent over A2A, for other agents (docs/a2a.md): `make web` serves it at /a2a/long_running_agent.

- card.py: the agent card, at /a2a/long_running_agent/.well-known/agent-card.json;
- endpoint.py: the client's bearer token, a bounded body, a2a-sdk's JSON-RPC dispatcher;
- handler.py: each request, answered by the agent and the ledger;
- outcome.py: the task's state, read from its ticket (the state table);
- records.py: tasks and push configurations, in the app's database.
"""

from __future__ import annotations

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from ..desk import Desk
from .card import agent_card
from .endpoint import A2aEndpoint
from .handler import ExpenseTasks

CARD_PATH = "/.well-known/agent-card.json"


def a2a_routes(desk: Desk, handler: ExpenseTasks, base_url: str) -> list[BaseRoute]:
    """The JSON-RPC endpoint and the card, at /a2a/<app> as `adk api_server --a2a` serves them."""
    prefix = f"/a2a/{desk.app.name}"
    card = agent_card_to_dict(agent_card(desk, base_url.rstrip("/") + prefix))

    async def card_route(_request: Request) -> JSONResponse:
        return JSONResponse(card)

    return [Route(prefix, A2aEndpoint(handler, desk.settings.a2a_clients).handle, methods=["POST"]),
            Route(prefix + CARD_PATH, card_route, methods=["GET"])]


__all__ = ["CARD_PATH", "ExpenseTasks", "a2a_routes"]
