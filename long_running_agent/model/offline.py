"""A deterministic, offline stand-in for Gemini, so the app runs with no key.

It is not a language model: it reads the request ADK builds (the system
instruction, the tool declarations and the conversation) and applies a few
plain rules, the way a careful model would use these two tools. It is good
enough to drive the tutorial, the tests and an `adk web` chat; set a Gemini
key to talk to a real model (see docs/gemini.md). Amounts are
read by `amounts_in_text`: one dollar amount, read for sure, or a question.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator
from decimal import Decimal
from typing import Any

from google.adk.models import BaseLlm, LlmRequest, LlmResponse

# LlmCapabilities is not exported yet; overriding `capabilities` keeps ADK from
# guessing this model's features from its name (see ADK_NOTES).
from google.adk.models._capabilities import LlmCapabilities
from google.adk.models.registry import LLMRegistry
from google.genai import types

from ..settings import settings
from ..tools import APPROVAL_TOOL, REIMBURSE_TOOL
from .amounts import find_amount

OFFLINE_MODEL_NAME = "offline-expense-model"

_ARTICLE = r"(?:the\s+|a\s+|an\s+|my\s+|our\s+)?"
_PURPOSES = [
    re.compile(rf"\b(?:for|on)\s+{_ARTICLE}(?P<p>.+)", re.IGNORECASE),
    re.compile(rf"\b(?:reimburse|refund|expense)\s+(?:me\s+)?{_ARTICLE}(?P<p>.+)", re.IGNORECASE),
]
_EXPENSE_WORDS = re.compile(r"\b(reimburs\w*|expense\w*|spent|paid|refund|receipt)\b", re.IGNORECASE)


def find_purpose(text: str, amount_span: tuple[int, int] | None) -> str | None:
    if amount_span:
        text = text[: amount_span[0]] + " " + text[amount_span[1]:]
    # One line, so a purpose written across a line break is read whole.
    text = " ".join(text.split())
    for pattern in _PURPOSES:
        match = pattern.search(text)
        if match:
            purpose = re.sub(r"\s*\b(please|thanks|thank you)\b.*$", "", match.group("p"), flags=re.I)
            purpose = " ".join(purpose.strip(" .!?,;:").split())
            if purpose:
                return purpose
    return None


def _threshold() -> Decimal:
    # What the app enforces (the tools check it too); the same number the instruction states.
    return settings().approval_threshold


def _tool_names(request: LlmRequest) -> set[str]:
    names: set[str] = set()
    for tool in (request.config.tools or []) if request.config else []:
        for declaration in getattr(tool, "function_declarations", None) or []:
            names.add(declaration.name)
    return names


def _money(value: Any) -> str:
    return f"${Decimal(str(value)):,.2f}"


def _call(name: str, purpose: str, amount: Decimal | float) -> types.Part:
    return types.Part(
        function_call=types.FunctionCall(name=name, args={"purpose": purpose, "amount": float(amount)})
    )


def _text(text: str) -> types.Part:
    return types.Part(text=text)


def _original_args(contents: list[types.Content], response: types.FunctionResponse) -> dict[str, Any]:
    """The arguments of the call `response` answers: by id, else the latest call of that name.

    ADK strips its own generated call ids before a request reaches the model.
    """
    for content in reversed(contents):
        for part in content.parts or []:
            call = part.function_call
            if call and call.name == response.name and (call.id == response.id or not response.id):
                return dict(call.args or {})
    return {}


def _after_approval(response: dict[str, Any], original: dict[str, Any], tools: set[str]) -> types.Part:
    status = response.get("status")
    ticket = response.get("ticket_id", "the ticket")
    purpose = original.get("purpose") or response.get("purpose")
    amount = original.get("amount") or response.get("amount")
    if status == "pending" and response.get("why"):
        # A small amount the daily rules sent to an approver: say why.
        return _text(
            f"{response['why']} I've opened ticket {ticket} for {_money(amount)} ({purpose}); it is "
            "waiting for an approver, and I will pay it once it is approved."
        )
    if status == "pending":
        return _text(
            f"Your request for {_money(amount)} ({purpose}) needs approval. "
            f"Ticket {ticket} is waiting for an approver; I will pay it once it is approved."
        )
    if status == "approved" and REIMBURSE_TOOL in tools and purpose and amount:
        return _call(REIMBURSE_TOOL, purpose, amount)
    if status == "rejected":
        reason = response.get("reason") or "no reason given"
        return _text(
            f"Ticket {ticket} was rejected by {response.get('decided_by', 'the approver')} "
            f"({reason}). Nothing was paid."
        )
    if status == "expired":
        return _text(
            f"Ticket {ticket} expired before anyone decided it. Nothing was paid; "
            "ask again if you still need the reimbursement."
        )
    if status == "error":
        return _text(f"I could not open an approval ticket: {response.get('error')}")
    return _text(f"The approval for ticket {ticket} came back as {status!r}. Nothing was paid.")


def _after_refusal(response: dict[str, Any], original: dict[str, Any], tools: set[str]) -> types.Part:
    """reimburse answered "needs_approval": ask for approval of the very same request."""
    purpose = original.get("purpose") or response.get("purpose")
    amount = original.get("amount") or response.get("amount")
    if APPROVAL_TOOL in tools and purpose and amount:
        return _call(APPROVAL_TOOL, purpose, amount)
    return _text(f"I could not pay it: {response.get('message', 'it needs an approver')}")


def _after_payout(response: dict[str, Any]) -> types.Part:
    status = response.get("status")
    if status == "paid":
        return _text(
            f"Done: {_money(response['amount'])} for {response['purpose']} was paid "
            f"(payout {response['payout_id']})."
        )
    if status == "already_paid":
        return _text(
            f"That expense was already paid (payout {response['payout_id']}); nothing more was paid."
        )
    return _text(f"I could not pay it: {response.get('error', status)}")


def _answer_user(contents: list[types.Content], text: str, request: LlmRequest) -> types.Part:
    tools = _tool_names(request)
    threshold = _threshold()
    found = find_amount(text)
    if isinstance(found, str):
        return _text(found)
    purpose = find_purpose(text, found[1] if found else None)
    if found and not purpose:
        # The purpose may have come in an earlier message ("reimburse lunch"); one
        # that named an amount too was another request, or was sent back as unclear.
        for earlier in reversed(_user_texts(contents)[:-1]):
            purpose = find_purpose(earlier, None) if find_amount(earlier) is None else None
            if purpose:
                break
    if found is None:
        if _EXPENSE_WORDS.search(text) or purpose:
            return _text("How much was it? Give the amount in US dollars, e.g. $250.")
        if news := _latest_news(contents):
            return _text(news)
        return _text(
            "I handle expense reimbursements. Tell me what you spent and how much, e.g. "
            f"'Reimburse $45 for a taxi' (paid at once, up to {_money(threshold)}) or "
            "'Reimburse $250 for the team lunch' (needs an approver first)."
        )
    amount, _span = found
    if not purpose:
        return _text(f"What was the {_money(abs(amount))} for?")
    # Without ask_for_approval to call, reimburse is the only way to pay: an agent
    # whose reimburse waits for ADK's tool confirmation above the limit (see
    # benchmarks/confirmation.py) gets the large amount through reimburse too.
    tool = APPROVAL_TOOL if amount > threshold and APPROVAL_TOOL in tools else REIMBURSE_TOOL
    if tool not in tools:
        return _text(f"I cannot do that here: the {tool} tool is not available.")
    return _call(tool, purpose, amount)


def _latest_news(contents: list[types.Content]) -> str | None:
    """The state of the latest approval in the conversation, for "any news?".

    A decision may have been delivered by another process since the user
    last wrote (`adk run` does not show it until they do).
    """
    for content in reversed(contents):
        for part in content.parts or []:
            response = part.function_response
            payload = dict(response.response or {}) if response else {}
            if response and response.name == REIMBURSE_TOOL and payload.get("status") == "paid":
                return f"Latest news: {_after_payout(payload).text}"
            if response and response.name == APPROVAL_TOOL:
                ticket, status = payload.get("ticket_id"), payload.get("status")
                if status == "pending":
                    return (f"Ticket {ticket} for {_money(payload.get('amount'))} ({payload.get('purpose')}) "
                            "is still waiting for an approver; I will pay it once it is approved.")
                if status in ("rejected", "expired"):
                    return f"Latest news: {_after_approval(payload, {}, set()).text}"
                return None
    return None


def _user_texts(contents: list[types.Content]) -> list[str]:
    return [
        " ".join(p.text for p in c.parts or [] if p.text and not p.thought)
        for c in contents
        if c.role == "user" and any(p.text and not p.thought for p in c.parts or [])
    ]


def next_turn(request: LlmRequest) -> types.Part:
    """The next model turn for `request`: one text or one function call."""
    contents = [c for c in request.contents if c.parts]
    if not contents:
        return _answer_user([], "", request)
    last = contents[-1]
    responses = [p.function_response for p in last.parts or [] if p.function_response]
    if responses:
        response = responses[-1]
        payload = dict(response.response or {})
        if response.name == APPROVAL_TOOL:
            original = _original_args(contents, response)
            return _after_approval(payload, original, _tool_names(request))
        if response.name == REIMBURSE_TOOL and payload.get("status") == "needs_approval":
            return _after_refusal(payload, _original_args(contents, response), _tool_names(request))
        if response.name == REIMBURSE_TOOL:
            return _after_payout(payload)
        return _text(f"{response.name} returned: {json.dumps(payload, default=str)}")
    texts = _user_texts([last])
    return _answer_user(contents, texts[0] if texts else "", request)


class OfflineExpenseModel(BaseLlm):
    """Rule-based model for the expense agent; see the module docstring."""

    model: str = OFFLINE_MODEL_NAME

    @classmethod
    def supported_models(cls) -> list[str]:
        return [re.escape(OFFLINE_MODEL_NAME)]

    @property
    def capabilities(self) -> LlmCapabilities:
        return LlmCapabilities()

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        part = next_turn(llm_request)
        prompt_chars = sum(len(str(c.model_dump(exclude_none=True))) for c in llm_request.contents)
        output_chars = len(str(part.model_dump(exclude_none=True)))
        yield LlmResponse(
            content=types.Content(role="model", parts=[part]),
            partial=False,
            turn_complete=True,
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=prompt_chars // 4,
                candidates_token_count=output_chars // 4,
                total_token_count=(prompt_chars + output_chars) // 4,
            ),
        )


LLMRegistry.register(OfflineExpenseModel)
