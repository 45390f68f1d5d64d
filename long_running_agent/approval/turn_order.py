"""Keep each model request to what the model should read, in the order Gemini accepts.

Two things happen to the history ADK builds before it reaches the model:

- The approval guard's notes ("only an approver can decide this ticket") are
  for people; they are left out, so the model's view of the conversation is
  the real request, call and decision.
- After a long-running call is resumed, ADK 2.13 keeps the agent's earlier
  "waiting for approval" reply and places it after the updated function
  response. The next request then holds two model turns in a row, and Gemini
  rejects a function-call turn that does not follow a user or
  function-response turn. Merging neighbouring model turns keeps every part,
  in order, in one turn.
"""

from __future__ import annotations

from google.adk.agents.callback_context import CallbackContext
from google.adk.models import LlmRequest, LlmResponse
from google.genai import types

from .guard import NOTE_MARK


def merge_consecutive_model_turns(
    callback_context: CallbackContext, llm_request: LlmRequest
) -> LlmResponse | None:
    notes = {
        part.text
        for event in callback_context.session.events
        if (event.custom_metadata or {}).get(NOTE_MARK) and event.content
        for part in event.content.parts or []
        if part.text
    }
    merged: list[types.Content] = []
    for content in llm_request.contents:
        if content.role == "model" and notes:
            content = types.Content(role="model", parts=[p for p in content.parts or [] if p.text not in notes])
            if not content.parts:
                continue
        if merged and content.role == "model" and merged[-1].role == "model":
            merged[-1] = types.Content(role="model", parts=[*(merged[-1].parts or []), *(content.parts or [])])
        else:
            merged.append(content)
    llm_request.contents = merged
    return None
