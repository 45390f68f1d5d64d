"""A deterministic, offline stand-in for Gemini, so the app runs with no key (docs/gemini.md for a real model).

Not a language model: it applies a few plain rules to the request ADK builds, as a careful model would use
these tools, and like Gemini may make several calls in one turn (one per expense, one `reimburse` per approval).
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator
from decimal import Decimal

from google.adk.models import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.models.registry import LLMRegistry
from google.genai import types

from ..adk_compat import LlmCapabilities
from ..ledger import inputs
from ..names import APPROVAL_TOOL, REIMBURSE_TOOL, WITHDRAW_TOOL
from .amounts import find_amount, find_money
from .requests import Expense, find_expenses, find_purpose
from .tool_results import after_answers, call_tool, dollars, latest_news, say, tickets

OFFLINE_MODEL_NAME = "offline-expense-model"

_EXPENSE_WORDS = re.compile(r"\b(reimburs\w*|expense\w*|spent|paid|refund|receipt)\b", re.IGNORECASE)
_WITHDRAW_WORDS = re.compile(r"\b(cancel\w*|withdraw\w*|retract|never\s*mind|take\s+back)\b", re.IGNORECASE)
_TICKET_ID = re.compile(r"\bT-[0-9a-f]{12}\b")
# A tool call carries the amount as a float, exact for up to 15 digits (MAX_REIMBURSEMENT is at most
# $1,000,000,000): a longer figure would reach the tool rounded, so it is refused here.
_FLOAT_EXACT_BELOW = Decimal(10) ** 13


def _limit(request: LlmRequest, words: str, default: int) -> Decimal:
    """A limit as agent.py's INSTRUCTION states it ("Up to $100", "at most $1,000,000"), or `default`."""
    said = str(request.config.system_instruction or "") if request.config else ""
    found = re.search(rf"{words} \$([0-9,]+(?:\.[0-9]+)?)", said)
    return Decimal(found[1].replace(",", "")) if found else Decimal(default)


def _tool_names(request: LlmRequest) -> set[str]:
    tools = (request.config.tools or []) if request.config else []
    return {declaration.name for tool in tools for declaration in getattr(tool, "function_declarations", None) or []}


def _refused(amount: Decimal, most: Decimal) -> str | None:
    """The amount rule's refusal (ledger/inputs.py) of a figure no tool call could carry exactly, or None."""
    if amount.copy_abs() < _FLOAT_EXACT_BELOW:  # copy_abs: exact, however long the figure
        return None
    try:
        inputs.amount(amount, most=most)
    except inputs.AmountError as error:
        return f"{error} Nothing was paid and no ticket was opened."
    return None


def _answer_user(contents: list[types.Content], text: str, request: LlmRequest) -> list[types.Part]:
    tools = _tool_names(request)
    threshold, most = _limit(request, "Up to", 100), _limit(request, "at most", 1_000_000)
    if _WITHDRAW_WORDS.search(text) and not find_money(text) and WITHDRAW_TOOL in tools:
        return [_withdraw(contents, text)]
    several = find_expenses(text)
    if isinstance(several, str):
        return [say(several)]
    if several:
        return [_pay_or_ask(expense, tools, threshold, most) for expense in several]
    found = find_amount(text)
    if isinstance(found, str):
        return [say(found)]
    if found is None:
        if _EXPENSE_WORDS.search(text) or find_purpose(text, None):
            return [say("How much was it? Give the amount in US dollars, e.g. $250.")]
        return [say(latest_news(contents) or (
            "I handle expense reimbursements. Tell me what you spent and how much, e.g. "
            f"'Reimburse $45 for a taxi' (paid at once, up to {dollars(threshold)}) or "
            "'Reimburse $250 for the team lunch' (needs an approver first)."
        ))]
    amount, span = found
    purpose = find_purpose(text, span)
    # The purpose may have come in an earlier message ("reimburse lunch"); one
    # that named an amount too was another request, or was sent back as unclear.
    for earlier in reversed(contents[:-1]):
        if purpose:
            break
        said = _user_text(earlier)
        purpose = None if find_money(said) else find_purpose(said, None)
    if refusal := _refused(amount, most):
        return [say(refusal)]
    if not purpose:
        return [say(f"What was the {dollars(abs(amount))} for?")]
    return [_pay_or_ask(Expense(amount, purpose), tools, threshold, most)]


def _pay_or_ask(expense: Expense, tools: set[str], threshold: Decimal, most: Decimal) -> types.Part:
    # Without ask_for_approval, reimburse is the only way to pay: an agent whose reimburse waits for
    # ADK's tool confirmation above the threshold (benchmarks/confirmation.py) gets large amounts through it too.
    if refusal := _refused(expense.amount, most):
        return say(refusal)
    large = expense.amount > threshold and APPROVAL_TOOL in tools
    tool = APPROVAL_TOOL if large else REIMBURSE_TOOL
    if tool not in tools:
        return say(f"I cannot do that here: the {tool} tool is not available.")
    return call_tool(tool, purpose=expense.purpose, amount=float(expense.amount))


def _withdraw(contents: list[types.Content], text: str) -> types.Part:
    """"Cancel my conference ticket request": the one pending ticket the message points at, or a question."""
    waiting = {tid: t for tid, t in tickets(contents).items() if t.status == "pending"}
    named = [tid for tid in _TICKET_ID.findall(text) if tid in waiting]
    if not named:
        words = set(re.findall(r"[^\W\d_]{3,}", text.casefold()))
        named = [tid for tid, t in waiting.items() if words & set(re.findall(r"[^\W\d_]{3,}", t.purpose.casefold()))]
    if not named and len(waiting) == 1:
        named = list(waiting)
    if len(named) == 1:
        return call_tool(WITHDRAW_TOOL, ticket_id=named[0])
    if not waiting:
        return say("You have no request waiting for an approver in this conversation, so there is nothing "
                   "to withdraw.")
    listed = "; ".join(f"{tid}: {dollars(t.amount)} for {t.purpose}" for tid, t in waiting.items())
    return say(f"Which request should I withdraw? Waiting: {listed}. Name the ticket or what it was for.")


def _user_text(content: types.Content) -> str:
    return " ".join(p.text for p in content.parts or [] if p.text and not p.thought) if content.role == "user" else ""


def next_turn(request: LlmRequest) -> list[types.Part]:
    """The next model turn for `request`: a text, one or more function calls, or both."""
    contents = [c for c in request.contents if c.parts]
    if not contents:
        return _answer_user([], "", request)
    if any(p.function_response for p in contents[-1].parts or []):
        return after_answers(contents, _tool_names(request))
    return _answer_user(contents, _user_text(contents[-1]), request)


class OfflineExpenseModel(BaseLlm):
    """Rule-based model for the expense agent; see the module docstring."""

    model: str = OFFLINE_MODEL_NAME

    @classmethod
    def supported_models(cls) -> list[str]:
        return [re.escape(OFFLINE_MODEL_NAME)]

    @property
    def capabilities(self) -> LlmCapabilities:
        # Declared, so that ADK does not guess this model's features from its name.
        return LlmCapabilities()

    async def generate_content_async(self, llm_request: LlmRequest,
                                     stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        parts = next_turn(llm_request)
        prompt_chars = sum(len(str(c.model_dump(exclude_none=True))) for c in llm_request.contents)
        output_chars = sum(len(str(p.model_dump(exclude_none=True))) for p in parts)
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=prompt_chars // 4, candidates_token_count=output_chars // 4,
            total_token_count=(prompt_chars + output_chars) // 4)
        yield LlmResponse(content=types.Content(role="model", parts=parts), partial=False, turn_complete=True,
                          usage_metadata=usage)


LLMRegistry.register(OfflineExpenseModel)
