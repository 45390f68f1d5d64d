"""What the model is shown: the real conversation, as the ledger knows it, in the order Gemini accepts.

Three things happen to the history ADK builds before it reaches the model:

- The approval guard's notes ("only an approver can decide this ticket") are
  for people; they are left out, so the model's view of the conversation is
  the real request, call and decision.
- When one of several approvals asked for in one turn arrives, ADK 2.13
  answers that turn's calls together (the new decision beside the others'
  latest answers) and leaves out what happened since. An approval that was
  paid meanwhile is shown with its payout id, so the model does not pay it
  again (the ledger would refuse, but the model would say so).
- After a long-running call is resumed, ADK 2.13 keeps the agent's earlier
  "waiting for approval" reply and places it after the updated function
  response. The next request then holds two model turns in a row, and Gemini
  rejects a function-call turn that does not follow a user or
  function-response turn. Merging neighbouring model turns keeps every part,
  in order, in one turn.
"""

from __future__ import annotations

from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from ..names import APPROVAL_TOOL
from .guard import NOTE_MARK
from .run import ApprovalRun, approval_run


async def prepare_model_request(
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
    if len(merged) > 1:
        merged[-1] = await _with_payouts(approval_run(callback_context), merged[-1])
    llm_request.contents = merged
    return None


async def _with_payouts(run: ApprovalRun, content: types.Content) -> types.Content:
    """`content` with the payout id on each approval in it that is paid already (several in one turn).

    Every approval is looked up, even when the turn holds nothing else: with
    two tickets from one message, the second approval arrives beside the
    first, already paid; shown without its payout, the model would pay it
    again and tell the approver "already paid" instead of what this approval did.
    """
    parts = content.parts or []
    approved = [p.function_response for p in parts
                if p.function_response and p.function_response.name == APPROVAL_TOOL
                and (p.function_response.response or {}).get("status") == "approved"]
    if not approved:
        return content
    ledger, shown = run.ledger, []
    for part in parts:
        response = part.function_response
        ticket_id = str(((response.response if response else None) or {}).get("ticket_id"))
        if response in approved and response is not None and ticket_id not in run.unpaid:
            paid = await ledger.payouts.find(ticket_id=ticket_id)
            if paid:
                part = types.Part(function_response=response.model_copy(
                    update={"response": {**(response.response or {}), "payout_id": paid[0].id}}))
        shown.append(part)
    return types.Content(role=content.role, parts=shown)
