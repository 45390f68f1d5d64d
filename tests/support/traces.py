"""Spans recorded in memory (OpenTelemetry's InMemorySpanExporter), through the app's own exporter setup.

OpenTelemetry has one global tracer provider per process; `recorded()` gives it, once, two exporters as the app
gives a collector's (observability/tracing.py): one with TRACE_CONTENT=false, one with true. Each test clears them.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from long_running_agent.observability.tracing import configure_tracing

_exporters: dict[bool, InMemorySpanExporter] = {}


def recorded(*, content: bool = False) -> InMemorySpanExporter:
    """The exporter that gets every span with content cut (or kept), emptied."""
    if not _exporters:
        for keeps in (False, True):
            _exporters[keeps] = InMemorySpanExporter()
            assert configure_tracing(endpoint=None, content=keeps, exporter=_exporters[keeps])
    _flush()  # spans still queued in the batch processors belong to what ran before
    for exporter in _exporters.values():
        exporter.clear()
    return _exporters[content]


def finished(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    """The spans ended so far (the batch processors flushed first)."""
    _flush()
    return list(exporter.get_finished_spans())


def _flush() -> None:
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    assert provider.force_flush()


def waterfall(spans: list[ReadableSpan], width: int = 40) -> str:
    """One trace drawn as text: each span indented under its parent, a bar where it ran (docs/operations.md)."""
    start = min(s.start_time or 0 for s in spans)
    total = max(s.end_time or 0 for s in spans) - start or 1
    children: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent and span.parent.span_id in ids else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def draw(parent: int | None, depth: int) -> None:
        for span in children.get(parent, []):
            begin = round(((span.start_time or 0) - start) / total * width)
            end = max(begin + 1, round(((span.end_time or 0) - start) / total * width))
            took = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
            lines.append(f"{'  ' * depth + span.name:<50.50} |{' ' * begin}{'█' * (end - begin)}"
                         f"{' ' * (width - end)}| {took:6.1f} ms")
            draw(span.context.span_id, depth + 1)

    draw(None, 0)
    return "\n".join(lines)
