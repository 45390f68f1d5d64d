"""A request body is read at most MAX_BODY bytes, however it arrives: with a Content-Length or chunked.

A chunked body declares no length to refuse up front, so it is counted as it is read, by the gate or by the route,
and reading stops at the limit: the server holds no more of a body than that, whatever the route does with it.
The gate (gate.py) runs every HTTP request through `bounded`, ADK's routes included.
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..ledger import inputs

MAX_BODY = 256 * 1024


class BodyTooLarge(Exception):
    """What reading a body past MAX_BODY raises, to whoever reads it."""


def too_large() -> JSONResponse:
    return JSONResponse({"error": "too_large", "message": f"The request body is over {MAX_BODY // 1024} KiB.",
                         "fix": f"Send a shorter message: chat messages are limited to {inputs.MAX_MESSAGE:,} "
                                "characters."}, status_code=413)


async def bounded(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    """Run `app` with its body cut at MAX_BODY; past it, the 413 replaces whatever `app` answers.

    `app` may not see BodyTooLarge itself (FastAPI answers any failure to read a body with a 400), so what it sends
    after the cut is dropped. An answer already started cannot become a 413: it is left unfinished, and the server
    closes the connection.
    """
    # To keep a connection, uvicorn reads what the app left of the body to its end, and a chunked body need not
    # have one: an answer given before it ended closes the connection. (A declared body, refused before it is
    # read, keeps it, so a client that sends all before it reads still gets the 413.)
    chunked = any(name == b"transfer-encoding" for name, _value in scope["headers"])
    read = 0
    over = started = ended = False

    async def counted() -> Message:
        nonlocal read, over, ended
        if over:
            raise BodyTooLarge
        message = await receive()
        if message["type"] == "http.request":
            read += len(message.get("body", b""))
            ended = not message.get("more_body", False)
            if over := read > MAX_BODY:
                raise BodyTooLarge
        return message

    async def sending(message: Message) -> None:
        nonlocal started
        if message["type"] == "http.response.start":
            started = True
            if chunked and not ended:
                message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
        await send(message)

    async def until_over(message: Message) -> None:
        if not over:
            await sending(message)

    try:
        await app(scope, counted, until_over)
    except Exception:
        if not over:
            raise
    if over and not started:
        await too_large()(scope, receive, sending)
