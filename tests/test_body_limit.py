"""Every route of `make web` reads at most 256 KiB of a body, however it arrives: declared or chunked.

Chunked uploads carry no Content-Length to refuse up front: the gate counts the body as it is read and answers the
JSON 413 once it passes the limit, closing the connection. Against a real server, four 700 MB uploads at once, with
no credentials, are cut off while its memory stays flat and /health keeps answering. In-process: the same refusal on
a route whose body the gate reads as JSON and on one it leaves to the route; a declared length over the limit refused
unread; a body at the limit still doing its work.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import psutil
import pytest
from starlette.types import Message, Receive, Scope, Send
from support.fake_slack import BOT_TOKEN, SIGNING_SECRET, USERS
from support.http import as_approver, assert_error, request_over_run
from support.receiver import SECRET
from support.servers import APP, TOKENS, in_process, web_server

from long_running_agent.web.body_limit import MAX_BODY, bounded

MIB = 1024 * 1024
SLACK = {
    "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_BOT_TOKEN": BOT_TOKEN,
    "SLACK_APPROVERS": ",".join(f"{user}:{name}" for user, name in USERS.items()),
    # Never called: no ticket is opened here. Slack approvals need a webhook to post their buttons to.
    "APPROVAL_WEBHOOK_URL": "http://127.0.0.1:9/hook", "APPROVAL_WEBHOOK_SECRET": SECRET,
}
# No credentials anywhere: no token, no Slack signature.
UPLOADS = [
    ("/api/approvals/T-000000000000/approve", "application/json"),
    ("/slack/actions", "application/x-www-form-urlencoded"),
    ("/run", "application/json"),  # read by the gate itself, for the user id in it
    (f"/apps/{APP}/users/alice/sessions", "application/octet-stream"),  # ADK's, read by the route
]


class Upload:
    """A chunked body: `head`, `size` bytes of `fill` in chunks of `chunk`, then `tail`; counts what was taken of it."""

    def __init__(self, size: int, *, head: bytes = b"", tail: bytes = b"", fill: bytes = b"x",
                 chunk: int = MIB) -> None:
        self.size, self.head, self.tail, self.fill, self.chunk = size, head, tail, fill, chunk
        self.taken = 0
        self.stopped = False  # ends it early, as a client giving up

    def chunks(self) -> Iterator[bytes]:
        full, rest = divmod(self.size, self.chunk)
        filled = self.fill * self.chunk
        for part in [self.head, *[filled] * full, self.fill * rest, self.tail]:
            if self.stopped:
                return
            if part:
                self.taken += len(part)
                yield part

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.chunks():
            yield part


def assert_too_large(answer: httpx.Response) -> None:
    assert_error(answer, 413, "too_large")
    # The rest of the body is never read: the server closes the connection after the answer.
    assert answer.headers.get("connection") == "close"


@pytest.mark.subprocess
async def test_four_chunked_uploads_of_700_mb_are_cut_off_while_memory_stays_flat_and_health_answers(tmp_path):
    with web_server(tmp_path, **SLACK) as server:
        assert server.process is not None
        process = psutil.Process(server.process.pid)
        before = process.memory_info().rss
        bodies = [Upload(700 * MIB) for _ in UPLOADS]

        def upload(path: str, kind: str, body: Upload) -> httpx.Response:
            # The server answers, closes, and the upload's next write is reset. httpx's sync client, like curl,
            # then reads the answer already there; an asyncio client closes its socket on the failed write unread.
            with httpx.Client(base_url=server.base_url, timeout=30) as client:
                return client.post(path, content=body.chunks(), headers={"Content-Type": kind})

        uploads = asyncio.gather(*[asyncio.to_thread(upload, path, kind, body)
                                   for (path, kind), body in zip(UPLOADS, bodies, strict=True)])
        rise = 0
        health: list[tuple[int | None, float]] = []

        async def memory() -> None:
            nonlocal rise
            while not uploads.done():
                rise = max(rise, process.memory_info().rss - before)
                if rise >= 100 * MIB:  # a server without the limit would take gigabytes: the uploads stop here
                    for body in bodies:
                        body.stopped = True
                await asyncio.sleep(0.01)

        async def poll_health(prober: httpx.AsyncClient) -> None:
            while not uploads.done() or len(health) < 3:
                started = time.monotonic()
                try:
                    status: int | None = (await prober.get("/health")).status_code
                except httpx.TimeoutException:
                    status = None
                health.append((status, round(time.monotonic() - started, 3)))
                await asyncio.sleep(0.05)

        async with httpx.AsyncClient(base_url=server.base_url, timeout=5) as prober:
            await asyncio.gather(memory(), poll_health(prober))
        answers = await uploads

        assert rise < 100 * MIB, f"the server's memory rose by {rise / MIB:.0f} MiB"
        assert all(status == 200 and seconds < 1 for status, seconds in health), health
        for (path, _kind), answer, body in zip(UPLOADS, answers, bodies, strict=True):
            assert_too_large(answer)
            # Cut off after a few MiB (what the sockets' buffers took before the reset), not after 700.
            assert body.taken < 64 * MIB, (path, body.taken)


async def test_a_chunked_body_over_the_limit_is_refused_on_a_route_read_as_json(desk):
    async with in_process(desk) as client:
        head = b'{"appName": "long_running_agent", "userId": "alice", "newMessage": {"parts": [{"text": "'
        body = Upload(MIB, head=head, chunk=64 * 1024)

        answer = await client.post("/run", content=body, headers={"Content-Type": "application/json"})

        assert_too_large(answer)
        assert body.taken <= MAX_BODY + 64 * 1024  # the rest was never asked for


async def test_a_chunked_body_over_the_limit_is_refused_on_a_route_that_reads_its_own_body(desk):
    async with in_process(desk) as client:
        body = Upload(MIB, chunk=64 * 1024)

        answer = await client.post("/api/approvals/T-000000000000/approve", content=body,
                                   headers={"Content-Type": "application/json"})

        assert_too_large(answer)
        assert body.taken <= MAX_BODY + 64 * 1024
        assert (await client.get("/health")).status_code == 200  # and the server goes on serving


async def test_a_declared_body_over_the_limit_is_refused_before_any_of_it_is_read(desk):
    async with in_process(desk) as client:
        body = Upload(MIB, chunk=64 * 1024)

        answer = await client.post("/api/approvals/T-000000000000/approve", content=body,
                                   headers={"Content-Type": "application/json", "Content-Length": str(MIB)})

        assert_error(answer, 413, "too_large")
        assert body.taken == 0
        # Its length is known: the connection is kept, so a client that sends all before it reads gets the 413.
        assert "connection" not in answer.headers


async def test_a_chunked_body_a_route_leaves_unread_closes_the_connection_after_the_answer(desk):
    async with in_process(desk) as client:
        answer = await client.request("GET", "/health", content=Upload(MIB, chunk=64 * 1024))

        assert answer.status_code == 200
        assert answer.headers.get("connection") == "close"  # the server never reads the rest


async def test_a_chunked_body_at_the_limit_still_does_its_work(desk, configure):
    configure(approvers={token: name for name, token in TOKENS.items()})
    json_body = {"Content-Type": "application/json"}
    async with in_process(desk) as client:
        # Read by the gate as JSON: a session whose state comes after spaces up to the limit.
        tail = b'"state": {"note": "fits"}}'
        made = await client.post(f"/apps/{APP}/users/alice/sessions", headers=json_body,
                                 content=Upload(MAX_BODY - 1 - len(tail), head=b"{", tail=tail, fill=b" "))
        assert made.status_code == 200 and made.json()["state"] == {"note": "fits"}, made.text
        assert "connection" not in made.headers  # read to its end: the connection is kept
        # Read by the route: an approval whose reason comes after spaces up to the limit.
        _session_id, _call, ticket_id = await request_over_run(client)
        tail = b'"reason": "team lunch"}'
        approved = await client.post(f"/api/approvals/{ticket_id}/approve", headers=json_body | as_approver("bob"),
                                     content=Upload(MAX_BODY - 1 - len(tail), head=b"{", tail=tail, fill=b" "))
        assert approved.status_code == 200, approved.text
        assert approved.json()["delivery"] == "delivered"
        assert [p["amount"] for p in approved.json()["payouts"]] == [250.0]


async def test_an_answer_already_started_when_the_body_passes_the_limit_is_left_unfinished():
    """A route that streams its answer while it reads: too late for a 413, so the server closes the connection."""
    sent: list[Message] = []
    body = iter([b"x" * MAX_BODY, b"x"])

    async def receive() -> Message:
        return {"type": "http.request", "body": next(body), "more_body": True}

    async def send(message: Message) -> None:
        sent.append(message)

    async def streaming(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        try:
            while True:
                await send({"type": "http.response.body", "body": (await receive())["body"][:1], "more_body": True})
        finally:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    await bounded(streaming, {"type": "http", "headers": [(b"transfer-encoding", b"chunked")]}, receive, send)

    assert [(m["type"], m.get("more_body")) for m in sent] == [("http.response.start", None),
                                                                ("http.response.body", True)]
    assert (b"connection", b"close") in sent[0]["headers"]
