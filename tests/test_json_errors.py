"""An unexpected error on any route is JSON, and the client's keep-alive connection survives it."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time

import httpx
import uvicorn
from fastapi import FastAPI

from long_running_agent.web.errors import JsonErrors


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
    # Bound here, and handed to uvicorn: no other test running beside this one can take the port meanwhile.
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(failing_app(), log_level="critical"))
    serving = asyncio.create_task(server.serve(sockets=[listening]))
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline and not serving.done(), "uvicorn did not start within 30 s"
            await asyncio.sleep(0.05)
        opened: list[int] = []

        async def count_connections(request: httpx.Request) -> None:
            pool = client._transport._pool  # type: ignore[attr-defined]
            opened.append(len(pool.connections))

        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                     event_hooks={"request": [count_connections]}) as client:
            failed = await client.get("/boom")
            fine = await client.get("/fine")

        assert failed.status_code == 500 and failed.headers["content-type"] == "application/json"
        assert failed.json()["error"] == "internal_error" and failed.json()["fix"]
        assert "a bug nobody foresaw" not in failed.text  # no internals leak to the client
        assert fine.json() == {"status": "ok"}
        # The second request went over the connection the first one opened.
        assert opened == [0, 1]
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        listening.close()
