"""Counting model calls and request bytes with an ADK plugin.

`ModelMeter` sees every request ADK sends to the model and records one call
and the request's size as JSON (contents, system instruction and tool
declarations: what would go over the wire to Gemini). It takes the request
in `before_model_callback` and measures it in `after_model_callback`, once
the agent's own callbacks (which may reshape the request, as this app's
delivery/turn_order.py does) have run and the model has read it.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.models import LlmRequest, LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import Runner

from .environment import OFFLINE_MODEL


def request_bytes(request: LlmRequest) -> int:
    """Size of `request` as JSON, roughly the body of a generateContent call."""
    body: dict[str, Any] = {
        "contents": [c.model_dump(mode="json", exclude_none=True) for c in request.contents],
    }
    if request.config is not None:
        body["config"] = request.config.model_dump(mode="json", exclude_none=True)
    return len(json.dumps(body, separators=(",", ":")).encode())


class ModelMeter(BasePlugin):
    """Counts model calls and request bytes, per session and in total."""

    def __init__(self) -> None:
        super().__init__(name="model_meter")
        self.calls: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()
        self._sent: dict[str, LlmRequest] = {}

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        if llm_request.model != OFFLINE_MODEL:
            # A real model would make the figures meaningless (and cost money).
            raise RuntimeError(f"benchmark expected {OFFLINE_MODEL}, got {llm_request.model}")
        self._sent[callback_context.invocation_id] = llm_request
        return None

    async def after_model_callback(
        self, *, callback_context: CallbackContext, llm_response: LlmResponse
    ) -> LlmResponse | None:
        request = self._sent.pop(callback_context.invocation_id, None)
        if request is not None:
            session_id = callback_context.session.id
            self.calls[session_id] += 1
            self.bytes[session_id] += request_bytes(request)
        return None

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes.values())


def metered(runner: Runner) -> ModelMeter:
    """Attach a new meter to `runner` (its own plugin list; the App is untouched)."""
    meter = ModelMeter()
    runner.plugin_manager.register_plugin(meter)
    return meter
