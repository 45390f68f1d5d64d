"""LOG_FORMAT=json: one JSON object per line, naming the ticket and the conversation of the step it was written in."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import pytest
from opentelemetry import trace

from long_running_agent.observability.logs import configure_logging
from long_running_agent.observability.spans import Watch


@pytest.fixture
def json_root(capsys):
    """Makes the root logger as LOG_FORMAT=json does, and puts it back afterwards; gives the lines written since."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level

    def configured() -> Callable[[], list[dict]]:
        assert configure_logging("json")  # in the test itself: capsys gives each phase a stderr of its own
        capsys.readouterr()
        return lambda: [json.loads(line) for line in capsys.readouterr().err.splitlines()]

    try:
        yield configured
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def test_each_record_is_one_json_line_with_the_ids_of_its_step(json_root):
    lines = json_root()
    log = logging.getLogger("long_running_agent.delivery.courier")
    watch = Watch()
    log.info("before any step")
    with watch.step("courier.deliver", ticket="T-0123456789ab") as step:
        step.about(session="s-42")
        log.warning("Delivering %s failed:\nsecond line", "T-0123456789ab")
        try:
            raise ValueError("the store is gone")
        except ValueError:
            log.exception("with its traceback")

    before, inside, failed = lines()
    assert before == {"time": before["time"], "level": "INFO", "logger": log.name, "message": "before any step"}
    assert (inside["ticket_id"], inside["session_id"], inside["level"]) == ("T-0123456789ab", "s-42", "WARNING")
    assert inside["message"] == "Delivering T-0123456789ab failed:\nsecond line"  # one line of JSON all the same
    assert failed["ticket_id"] == "T-0123456789ab" and "ValueError: the store is gone" in failed["exception"]


def test_a_record_inside_a_recorded_span_names_its_trace(json_root):
    from opentelemetry.sdk.trace import TracerProvider

    lines = json_root()
    with TracerProvider().get_tracer("tests").start_as_current_span("request") as span:
        logging.getLogger("long_running_agent.web.server").warning("/health: the database is unreachable")
    [line] = lines()
    assert line["trace_id"] == f"{span.get_span_context().trace_id:032x}"
    assert line["span_id"] == f"{span.get_span_context().span_id:016x}"


def test_text_leaves_logging_as_python_and_uvicorn_set_it():
    root = logging.getLogger()
    handlers = root.handlers[:]
    assert configure_logging("text") is False
    assert root.handlers == handlers
    assert trace.get_current_span().get_span_context().is_valid is False
