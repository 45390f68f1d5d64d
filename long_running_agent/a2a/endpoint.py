"""POST /a2a/long_running_agent: the client's bearer token first, then a bounded body, then a2a-sdk's dispatcher.

A missing or unknown token is a 401 in the app's JSON error shape before the body is read, so no task exists for
it. The token names the requester (A2A_CLIENTS): the call context a2a-sdk hands the handler carries that name, and
nothing in the request can change it. A body past MAX_BODY is a JSON-RPC error, as is anything the dispatcher
cannot parse.
"""

from __future__ import annotations

from collections.abc import Mapping

from a2a.auth.user import User
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Message

from .handler import ExpenseTasks

MAX_BODY = 256 * 1024
_CLIENT = "a2a.client"  # where the endpoint leaves the authenticated name in the request's scope


class Client(User):
    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self.name


class ClientContext(DefaultServerCallContextBuilder):
    """a2a-sdk's call context, its user the client the endpoint authenticated."""

    def build_user(self, request: Request) -> User:
        return Client(request.scope[_CLIENT])


def unauthorized(why: str) -> JSONResponse:
    return JSONResponse({"error": "unauthorized", "message": why,
                         "fix": "Send Authorization: Bearer <token>, with a client token from A2A_CLIENTS "
                                "(name:token, set where the server runs; docs/a2a.md)."},
                        status_code=401, headers={"WWW-Authenticate": 'Bearer realm="a2a"'})


def too_large() -> JSONResponse:
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": f"The request body is over {MAX_BODY // 1024} KiB: send a shorter message."}},
        status_code=413)


async def _bounded_body(request: Request) -> bytes | None:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        return None
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            return None
    return body


class A2aEndpoint:
    def __init__(self, handler: ExpenseTasks, clients: Mapping[str, str]) -> None:
        self.clients = clients  # {token: requester name}
        self.dispatcher = JsonRpcDispatcher(handler, context_builder=ClientContext(), enable_v0_3_compat=True)

    async def handle(self, request: Request) -> Response:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return unauthorized("This agent needs a client token." if self.clients else
                                "No A2A clients are set up on this server (A2A_CLIENTS is empty).")
        client = self.clients.get(token.strip())
        if client is None:
            return unauthorized("That token is not a client token of this server.")
        body = await _bounded_body(request)
        if body is None:
            return too_large()
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:  # then the connection's own events: a stream learns of a client that left
                return await request.receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        scope = dict(request.scope) | {_CLIENT: client}
        return await self.dispatcher.handle_requests(Request(scope, replay))
