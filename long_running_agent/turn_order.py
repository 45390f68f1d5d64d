"""Keep the model turns of a request in the order Gemini accepts.

After a long-running call is resumed, ADK 2.13 keeps the agent's earlier
"waiting for approval" reply and places it after the updated function
response. The next request then holds two model turns in a row
([..., approved response, model: "waiting...", model: call reimburse, ...]),
and Gemini rejects a function-call turn that does not follow a user or
function-response turn. Merging neighbouring model turns keeps every part,
in order, in one turn.
"""

from __future__ import annotations

from google.adk.agents.callback_context import CallbackContext
from google.adk.models import LlmRequest, LlmResponse
from google.genai import types


def merge_consecutive_model_turns(
    callback_context: CallbackContext, llm_request: LlmRequest
) -> LlmResponse | None:
    merged: list[types.Content] = []
    for content in llm_request.contents:
        if merged and content.role == "model" and merged[-1].role == "model":
            merged[-1] = types.Content(role="model", parts=[*(merged[-1].parts or []), *(content.parts or [])])
        else:
            merged.append(content)
    llm_request.contents = merged
    return None
