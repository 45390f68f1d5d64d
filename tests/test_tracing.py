"""Traces: the ledger's steps inside ADK's spans, one trace per flow, and nothing a person wrote sent out unasked.

The spans go through the app's own exporter setup (observability/tracing.py) into OpenTelemetry's in-memory
exporter: no collector. A flow is run as an application runs it, inside one span of its own (a request, a command).
"""

from __future__ import annotations

import json
import re

import google.adk
from opentelemetry import trace
from support.conversation import Conversation, pending_calls, responses
from support.desks import TestDesk
from support.http import new_session, run_body, user_text
from support.processes import ROOT
from support.servers import LUNCH, in_process
from support.traces import finished, recorded, waterfall
from support.transcripts import updating

from long_running_agent.delivery.courier import Courier
from long_running_agent.names import APP_NAME
from long_running_agent.observability.spans import SESSION, TICKET, Watch
from long_running_agent.observability.tracing import CUT

DOCS = ROOT / "docs"


async def approved_flow(desk: TestDesk) -> tuple[str, str]:
    """A $250 request, bob's approval and the payout, in one span; returns (ticket id, session id)."""
    await desk.prepare()  # before the span, as at a server's start: the tables are created
    chat = await Conversation(desk.runner()).start()
    with trace.get_tracer("tests").start_as_current_span("expense flow"):
        events = await chat.say("Please reimburse $250 for the team lunch")
        [_call] = pending_calls(events)
        [pending] = responses(events, "ask_for_approval")
        delivery = await Courier(desk).decide(pending["ticket_id"], approver="bob", approve=True)
        assert delivery.delivered
    return pending["ticket_id"], str(chat.session_id)


def by_name(spans, name):
    found = [s for s in spans if s.name == name]
    assert found, f"no span {name!r} among {sorted({s.name for s in spans})}"
    return found


def parent_of(spans, span):
    [parent] = [s for s in spans if s.context.span_id == span.parent.span_id]
    return parent


async def test_one_flow_is_one_trace_with_the_ledger_inside_adks_tool_spans(desk):
    exporter = recorded()
    ticket_id, session_id = await approved_flow(desk)
    spans = finished(exporter)

    assert len({s.context.trace_id for s in spans}) == 1
    [root] = by_name(spans, "expense flow")
    assert all(s.parent is not None for s in spans if s is not root)
    # ADK's spans: the agent's runs, the model's calls, each tool's call.
    assert len(by_name(spans, "invoke_agent expense_agent")) == 2
    assert len([s for s in spans if s.name.startswith(("call_llm", "generate_content"))]) >= 4
    [request] = by_name(spans, "ledger.request")
    [pay] = by_name(spans, "ledger.pay")
    assert parent_of(spans, request).name == "execute_tool ask_for_approval"
    assert parent_of(spans, pay).name == "execute_tool reimburse"
    # The decision, then its delivery, whose run of the agent holds the payout.
    [decide] = by_name(spans, "ledger.decide")
    [deliver] = by_name(spans, "courier.deliver")
    assert parent_of(spans, decide) is root and parent_of(spans, deliver) is root
    ancestors, span = [], pay
    while span.parent is not None:
        span = parent_of(spans, span)
        ancestors.append(span.name)
    assert ancestors[-2:] == ["courier.deliver", "expense flow"] and "invoke_agent expense_agent" in ancestors
    for step in (request, pay, decide, deliver):
        assert (step.attributes[TICKET], step.attributes[SESSION]) == (ticket_id, session_id)
    assert decide.attributes["expenses.outcome"] == "approved"


def everything_in(span) -> str:
    return json.dumps([dict(span.attributes), [dict(e.attributes or {}) for e in span.events]], default=str)


def with_content(spans) -> list[str]:
    return sorted({s.name for s in spans if any(w in everything_in(s) for w in ("team lunch", "$250", "250.0"))})


async def test_spans_leave_without_amounts_purposes_or_messages_unless_trace_content_allows(desk, monkeypatch):
    # ADK's own switches, on: its spans then carry the chat's messages and each tool's arguments and result.
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_AND_EVENT")
    monkeypatch.setenv("ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS", "true")
    cut, kept = recorded(), recorded(content=True)
    ticket_id, _session_id = await approved_flow(desk)

    assert with_content(finished(cut)) == []
    [request] = by_name(finished(cut), "ledger.request")
    assert request.attributes[TICKET] == ticket_id and request.attributes["expenses.purpose"] == CUT
    # TRACE_CONTENT=true: the same spans, as recorded.
    shown = with_content(finished(kept))
    assert {"ledger.request", "ledger.pay", "execute_tool ask_for_approval", "execute_tool reimburse"} <= set(shown)
    assert any(name.startswith(("call_llm", "generate_content")) for name in shown)  # the model's span
    [request] = by_name(finished(kept), "ledger.request")
    assert (request.attributes["expenses.purpose"], request.attributes["expenses.amount"]) == ("team lunch", 250.0)


PICTURE = re.compile(r"<!-- trace: (?P<name>[^>]*) -->\n```text\n(?P<body>.*?)```", re.S)


def tree(picture: str) -> list[str]:
    """A waterfall's spans and their nesting, without the bars (their lengths differ from run to run)."""
    return [line.split("|")[0].rstrip() for line in picture.splitlines()]


async def test_the_trace_in_docs_operations_is_drawn_from_a_real_run(desk):
    await approved_flow(desk)  # the first run of a process loads and builds what later ones reuse: not drawn
    exporter = recorded()
    await approved_flow(desk)
    drawn = waterfall(finished(exporter))
    page = DOCS / "operations.md"
    [shown] = [m for m in PICTURE.finditer(page.read_text()) if m.group("name") == "an approved request"]
    if updating():
        text = page.read_text()
        page.write_text(text[:shown.start("body")] + drawn + "\n" + text[shown.end("body"):])
        return
    assert tree(shown.group("body")) == tree(drawn), "refresh it: UPDATE_DOCS=1 .venv/bin/python -m pytest " \
                                                     "tests/test_tracing.py"


async def test_with_the_apps_exporter_the_dev_uis_trace_view_shows_a_run_from_adk_2_10(desk):
    """docs/operations.md: `make web` sets the tracer provider first; ADK 2.10+ adds its trace view to it."""
    exporter = recorded()  # the app's exporter on the process's provider, as with OTEL_EXPORTER_OTLP_ENDPOINT set
    async with in_process(desk) as client:
        session_id = await new_session(client, "alice")
        asked = await client.post("/run", json=run_body("alice", session_id, user_text(LUNCH)))
        view = await client.get(f"/dev/apps/{APP_NAME}/debug/trace/session/{session_id}")
    assert asked.status_code == view.status_code == 200, view.text
    assert any(s.name.startswith("invoke_agent") for s in finished(exporter))
    release = tuple(int(part) for part in google.adk.__version__.split(".")[:2])
    assert bool(view.json()) is (release >= (2, 10)), view.json()


def test_a_listener_that_fails_never_fails_the_step_it_hears_of(caplog):
    watch, heard = Watch(), []
    watch.listen(lambda step: 1 / 0)
    watch.listen(heard.append)
    with watch.step("ledger.pay", ticket="T-0123456789ab") as step:
        step.note(paid=True, amount=250.0)
    assert [s.facts for s in heard] == [{"paid": True, "amount": 250.0}]
    assert "A listener of ledger.pay failed" in caplog.text
