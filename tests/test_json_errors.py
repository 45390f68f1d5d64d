"""Every error `make web` answers is JSON `{error, message, fix}`: ADK's routes walked with bad input (bad
JSON, fields of the wrong type, an app, a session or a route that does not exist, a wrong method), ADK's
plain-text 403s, refused WebSocket handshakes; an unexpected error too, on a keep-alive connection that survives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn
import websockets
from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel
from support.http import assert_error
from support.servers import APP, in_process

from long_running_agent.web import create_server
from long_running_agent.web.json_errors import JsonErrors


def failing_app() -> FastAPI:
    app = FastAPI()

    @app.get("/boom")
    async def boom() -> dict[str, str]:
        raise RuntimeError("a bug nobody foresaw")

    @app.get("/fine")
    async def fine() -> dict[str, str]:
        return {"status": "ok"}

    app.add_middleware(JsonErrors)
    return app


async def test_an_unexpected_error_is_json_and_the_connection_stays_open():
    opened: list[int] = []

    async def count_connections(request: httpx.Request) -> None:
        pool = client._transport._pool  # type: ignore[attr-defined]
        opened.append(len(pool.connections))

    async with served(failing_app()) as port, httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", event_hooks={"request": [count_connections]}) as client:
        failed = await client.get("/boom")
        fine = await client.get("/fine")

    assert failed.status_code == 500 and failed.headers["content-type"] == "application/json"
    assert failed.json()["error"] == "internal_error" and failed.json()["fix"]
    assert "a bug nobody foresaw" not in failed.text  # no internals leak to the client
    assert fine.json() == {"status": "ok"}
    # The second request went over the connection the first one opened.
    assert opened == [0, 1]


# --- every route of ADK's app on make web's server, with bad input ----------------------------

# Values for path parameters: the app (or one that does not exist), a user, and ids that do not exist.
APPS = (APP, "nope")
WRONG_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def with_path(route: APIRoute, *, wrong_types: bool, app: str = APP) -> str:
    """The route's path, filled in; with `wrong_types`, a whole-number parameter gets a word."""
    kinds = {param.name: param.field_info.annotation for param in route.dependant.path_params}

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if wrong_types and kinds.get(name) is int:
            return "seven"
        return {"app_name": app, "user_id": "alice"}.get(name, "1" if kinds.get(name) is int else "nope")

    return re.sub(r"\{(\w+)(?::path)?\}", value, route.path)


def wrong_bodies(route: APIRoute) -> list[bytes | None]:
    """Bodies the route must refuse: none, not JSON, not an object, and each of its fields of the wrong type."""
    if route.body_field is None:
        return [None]
    model = route.body_field.field_info.annotation
    fields = [f.alias or name for name, f in model.model_fields.items()] \
        if isinstance(model, type) and issubclass(model, BaseModel) else []
    # [[[]]] is no string, number, object, boolean or list of any of them.
    bodies = [None, b"", b"{not json", b"[]", b'"text"', json.dumps(dict.fromkeys(fields, [[[]]])).encode()]
    if {"appName", "sessionId"} <= set(fields):  # /run and /run_sse: well formed, naming what does not exist
        bodies += [json.dumps({"appName": app, "userId": "alice", "sessionId": "nope",
                               "newMessage": {"role": "user", "parts": [{"text": "any news?"}]}}).encode()
                   for app in APPS]
    return bodies


def assert_json_refusal(answer: httpx.Response, method: str, url: str) -> None:
    where = f"{method} {url} -> {answer.status_code}: {answer.text[:300]}"
    assert answer.headers.get("content-type", "").startswith("application/json"), where
    body = answer.json()
    assert set(body) == {"error", "message", "fix"}, where
    assert all(isinstance(value, str) and value for value in body.values()), where
    assert "Traceback" not in answer.text and "[SQL" not in answer.text, where


async def test_every_error_adks_routes_answer_on_make_web_is_json_with_a_fix(desk, monkeypatch):
    # As where ADK's eval extra is missing: its metrics route then answers a 400 (which must be JSON too) instead
    # of importing the evaluator, a large import (tests/test_eval.py runs that).
    monkeypatch.setitem(sys.modules, "google.adk.evaluation.metric_evaluator_registry", None)
    statuses: dict[int, set[str]] = {}
    met: dict[tuple[str, str], set[str]] = {}  # the errors each route answered
    async with in_process(desk) as client:
        routes = [r for r in client._transport.app.routes if isinstance(r, APIRoute)]  # type: ignore[attr-defined]
        assert any(r.path == "/run" for r in routes) and len(routes) > 50  # ADK's app, not only ours
        for route in routes:
            for app, wrong_types in ((APP, False), (APP, True), ("nope", False)):
                url = with_path(route, wrong_types=wrong_types, app=app)
                query = "&".join(f"{param.name}=seven" for param in route.dependant.query_params)
                asks = [(method, body) for method in sorted(route.methods) for body in wrong_bodies(route)]
                asks += [(method, None) for method in WRONG_METHODS if method not in route.methods]
                for method, body in asks:
                    headers = {"content-type": "application/json"} if body is not None else {}
                    for target in (url, f"{url}?{query}" if query else None):
                        if target is None:
                            continue
                        answer = await client.request(method, target, content=body, headers=headers)
                        if answer.status_code >= 400:
                            assert_json_refusal(answer, method, target)
                            statuses.setdefault(answer.status_code, set()).add(answer.json()["error"])
                            met.setdefault((method, route.path), set()).add(answer.json()["error"])
        for method, url in [("GET", "/nope"), ("POST", "/apps"), ("GET", "/dev-ui/nope.js"),
                            ("GET", "/inbox/nope.css"), ("GET", "/run_live")]:
            answer = await client.request(method, url)
            assert answer.status_code >= 400
            assert_json_refusal(answer, method, url)
    # The walk met every kind of refusal: bad fields and bad JSON, unknown apps, sessions and routes,
    # wrong methods.
    assert "invalid_request" in statuses[422] and "method_not_allowed" in statuses[405], statuses
    assert {"not_found", "not_served", "app_not_found"} <= statuses[404], statuses
    # ADK's own 404s for a session it does not have, on its routes and in a /run body, and bad JSON there.
    session = "/apps/{app_name}/users/{user_id}/sessions/{session_id}"
    assert {"not_found", "app_not_found"} <= met[("GET", session)], met[("GET", session)]
    for run in ("/run", "/run_sse"):
        assert {"not_found", "app_not_found", "invalid_request"} <= met[("POST", run)], met[("POST", run)]
    # ADK's 400 for its missing eval extra.
    assert "bad_request" in met[("GET", "/dev/apps/{app_name}/metrics-info")]


async def test_adks_plain_text_403s_are_json(desk):
    async with in_process(desk) as client:
        # ADK's DNS-rebinding check: a loopback server answers only requests addressed to a loopback name.
        rebound = await client.get("/list-apps", headers={"Host": "expenses.example"})
        assert_error(rebound, 403, "host_not_allowed")
        # ADK's origin check: a page of another site may not call it.
        foreign = await client.post(f"/apps/{APP}/users/alice/sessions", json={},
                                    headers={"Origin": "https://evil.example"})
        assert_error(foreign, 403, "origin_not_allowed")
        preflight = await client.options("/run", headers={"Origin": "https://evil.example",
                                                          "Access-Control-Request-Method": "POST"})
        assert_error(preflight, 403, "origin_not_allowed")
        # The same requests from the server's own origin are served.
        same = await client.post(f"/apps/{APP}/users/alice/sessions", json={},
                                 headers={"Origin": "http://127.0.0.1"})
        assert same.status_code == 200, same.text


@contextlib.asynccontextmanager
async def served(app: FastAPI) -> AsyncIterator[int]:
    """`app` on a real uvicorn (real WebSocket handshakes), on a port bound here; yields the port."""
    # Bound here, and handed to uvicorn: no other test running beside this one can take the port meanwhile.
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical"))
    serving = asyncio.create_task(server.serve(sockets=[listening]))
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline and not serving.done(), "uvicorn did not start within 30 s"
            await asyncio.sleep(0.05)
        yield listening.getsockname()[1]
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        listening.close()


@pytest.mark.parametrize(("query", "headers", "status", "error"), [
    ("app_name=long_running_agent&session_id=s", {}, 422, "invalid_request"),  # FastAPI: user_id missing
    ("user_id=alice&session_id=s", {}, 403, "websocket_refused"),  # ADK closes it: app_name missing
    ("app_name=nope&user_id=alice&session_id=s", {}, 404, "app_not_found"),  # the gate
    ("app_name=long_running_agent&user_id=Alice&session_id=s", {}, 422, "invalid_user_id"),  # the gate
    ("app_name=long_running_agent&user_id=alice&session_id=s", {"Origin": "https://evil.example"}, 403,
     "origin_not_allowed"),  # ADK's own check, closed before the handshake
])
async def test_a_refused_websocket_handshake_is_answered_with_json(desk, query, headers, status, error):
    async with served(create_server(desk)) as port:
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(f"ws://127.0.0.1:{port}/run_live?{query}", additional_headers=headers,
                                          open_timeout=30):
                pass
    answer = refused.value.response
    assert answer.status_code == status, answer.body
    assert answer.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = json.loads(answer.body)
    assert set(body) == {"error", "message", "fix"} and body["error"] == error and body["fix"], body
