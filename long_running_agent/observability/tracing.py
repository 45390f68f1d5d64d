"""Sending traces to a collector: OTLP over HTTP, configured by OpenTelemetry's own OTEL_* variables.

ADK starts spans for agent runs, model calls and tool calls on OpenTelemetry's global tracer provider, and the ledger's
steps (spans.py) nest in them. `configure_tracing` gives that provider an exporter: the OTLP one (the `otel` extra)
when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, or the one a test hands it. Every span
leaves through `WithoutContent`, which cuts what people wrote (a purpose, an amount, a chat message, a tool's
arguments) unless TRACE_CONTENT=true: the collector's readers are not the ledger's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from ..refusals.startup import SettingsError
from .spans import AMOUNT, PURPOSE

CUT = "[cut: TRACE_CONTENT=false]"
# Attributes that hold content: the app's, ADK's (legacy and GenAI semantic conventions), google-genai's.
CONTENT_KEYS = frozenset({AMOUNT, PURPOSE, "gcp.vertex.agent.llm_request", "gcp.vertex.agent.llm_response",
                          "gcp.vertex.agent.tool_call_args", "gcp.vertex.agent.tool_response",
                          "gcp.vertex.agent.data", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
                          "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
                          "gen_ai.prompt", "gen_ai.completion"})
CONTENT_PREFIXES = ("gen_ai.prompt.", "gen_ai.completion.", "gen_ai.input.", "gen_ai.output.")


def is_content(key: str) -> bool:
    return key in CONTENT_KEYS or key.startswith(CONTENT_PREFIXES)


def _cut(attributes: Any) -> dict[str, Any]:
    return {key: CUT if is_content(key) else value for key, value in (attributes or {}).items()}


class WithoutContent(SpanExporter):
    """Exports each span with its content attributes (and its events', which carry messages) replaced by CUT."""

    def __init__(self, exporter: SpanExporter) -> None:
        self.exporter = exporter

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.exporter.export([_without_content(span) for span in spans])

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)


def _without_content(span: ReadableSpan) -> ReadableSpan:
    events = [Event(event.name, _cut(event.attributes), event.timestamp) for event in span.events]
    return ReadableSpan(
        name=span.name, context=span.context, parent=span.parent, resource=span.resource,
        attributes=_cut(span.attributes), events=events, links=span.links, kind=span.kind, status=span.status,
        start_time=span.start_time, end_time=span.end_time, instrumentation_scope=span.instrumentation_scope)


def configure_tracing(*, endpoint: str | None, content: bool, exporter: SpanExporter | None = None) -> bool:
    """Export spans to `endpoint`'s collector (OTLP/HTTP) or to `exporter`; False if there is nowhere to send them.

    On the global tracer provider ADK uses: the one already set (`make web`'s, set by ADK), or a new one, named by
    OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES as OpenTelemetry reads them.
    """
    if exporter is None:
        if not endpoint:
            return False
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise SettingsError("OTEL_EXPORTER_OTLP_ENDPOINT is set, but the OTLP exporter is not installed.",
                                next_step="Install it from the project folder: .venv/bin/pip install -e '.[otel]', "
                                "or unset OTEL_EXPORTER_OTLP_ENDPOINT.") from None
        exporter = OTLPSpanExporter()  # reads the endpoint, headers, timeout and compression from OTEL_*
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(BatchSpanProcessor(exporter if content else WithoutContent(exporter)))
    return True
