"""`make web` sending its traces to a collector over OTLP/HTTP (the `otel` extra), a fake one on loopback.

What reaches it: one trace per HTTP request, the ledger's steps and ADK's spans inside it, the service named by
OTEL_SERVICE_NAME, and no purpose or amount (TRACE_CONTENT is off).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from support.http import as_approver, request_over_run
from support.servers import web_server

pytestmark = pytest.mark.subprocess
trace_service = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2",
                                    reason="the otel extra is not installed")


@pytest.fixture
def collector() -> Iterator[tuple[str, list[bytes]]]:
    """An OTLP/HTTP receiver on a free loopback port: its address, and every body POSTed to /v1/traces."""
    bodies: list[bytes] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path == "/v1/traces":
                bodies.append(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{receiver.server_address[1]}", bodies
    receiver.shutdown()


WANTED = {"POST /run", "ledger.request", "POST /api/approvals/{ticket_id}/approve", "ledger.decide",
          "courier.deliver", "ledger.pay"}


async def collected(bodies: list[bytes]) -> None:
    """Wait (10 s at most) until the spans WANTED have reached the collector."""
    for _ in range(100):
        if WANTED <= {span.name for span in spans_in(bodies)[1]}:
            return
        await asyncio.sleep(0.1)


def spans_in(bodies: list[bytes]) -> tuple[set[str], list]:
    services, spans = set(), []
    for body in bodies:
        request = trace_service.ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            services |= {a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"}
            spans += [span for scope in resource_spans.scope_spans for span in scope.spans]
    return services, spans


async def test_a_request_and_its_approval_reach_the_collector_as_two_traces_without_content(collector, tmp_path):
    endpoint, bodies = collector
    settings = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "expenses-under-test",
                "OTEL_BSP_SCHEDULE_DELAY": "100"}  # milliseconds between the batches sent
    with web_server(tmp_path, **settings) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
            _session_id, _call, ticket_id = await request_over_run(client)
            approved = await client.post(f"/api/approvals/{ticket_id}/approve", headers=as_approver("bob"))
            assert approved.status_code == 200, approved.text
            await collected(bodies)
    services, spans = spans_in(bodies)
    named = {s.name: s for s in spans}
    assert WANTED <= set(named), sorted(named)
    assert services == {"expenses-under-test"}
    # The request's trace holds ADK's run and the ledger's request; the approval's, the decision and the payout.
    for http, steps in (("POST /run", ("ledger.request", "execute_tool ask_for_approval")),
                        ("POST /api/approvals/{ticket_id}/approve", ("ledger.decide", "courier.deliver",
                                                                     "execute_tool reimburse", "ledger.pay"))):
        assert {named[step].trace_id for step in steps} == {named[http].trace_id}
    ticket_ids = {a.value.string_value for a in named["ledger.pay"].attributes if a.key == "expenses.ticket_id"}
    assert ticket_ids == {ticket_id}
    assert not [body for body in bodies if b"team lunch" in body]
