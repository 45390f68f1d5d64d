"""What the model is shown: the real conversation, as the ledger knows it, in the order Gemini accepts.

- The guard's notes are for people: they are left out.
- ADK 2.13 answers the calls of a turn together when one of several approvals arrives, and leaves out what happened
  since: an approval paid meanwhile is shown with its payout id, so the model does not pay it again.
- After a resume, ADK 2.13 places the agent's earlier "waiting" reply after the updated response: two model turns
  in a row, which Gemini rejects. Neighbouring model turns are merged, every part kept in order (docs/gemini.md).
"""

from __future__ import annotations

from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from ..names import APPROVAL_TOOL
from .notes import NOTE_MARK
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
    """`content` with the payout id on each approval in it that is paid already.

    Looked up even when the turn holds only approvals: the second of two tickets from one message arrives beside the
    first, already paid (docs/delivery.md#several-tickets-lower-amounts-withdrawals).
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
