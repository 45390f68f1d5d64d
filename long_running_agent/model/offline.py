"""A deterministic, offline stand-in for Gemini, so the app runs with no key.

It is not a language model: it reads the request ADK builds (the system
instruction, the tool declarations and the conversation) and applies a few
plain rules, the way a careful model would use these tools. It is good
enough to drive the tutorial, the tests and an `adk web` chat; set a Gemini
key to talk to a real model (see docs/gemini.md). A message is read by
`requests.py` (the expenses in it) and `amounts.py` (each amount, for sure,
or a question).

Like Gemini, it may answer with several function calls in one turn: one per
expense in a message, and one `reimburse` per approval that arrived.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

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

OFFLINE_MODEL_NAME = "offline-expense-model"

_EXPENSE_WORDS = re.compile(r"\b(reimburs\w*|expense\w*|spent|paid|refund|receipt)\b", re.IGNORECASE)
_WITHDRAW_WORDS = re.compile(r"\b(cancel\w*|withdraw\w*|retract|never\s*mind|take\s+back)\b", re.IGNORECASE)
_TICKET_ID = re.compile(r"\bT-[0-9a-f]{12}\b")


@dataclass
class _Answer:
    """A function call and the response that answered it, read from the conversation."""

    call: types.FunctionCall
    response: dict[str, Any]

    @property
    def status(self) -> str:
        # What the dev UI and `adk run` send for a typed answer: {"result": text}.
        return str(self.response.get("status", self.response.get("result")))

    @property
    def purpose(self) -> str:
        return str((self.call.args or {}).get("purpose", "your expense"))

    @property
    def amount(self) -> Any:
        return (self.call.args or {}).get("amount")


@dataclass(frozen=True)
class _Limits:
    """The numbers the agent's instruction states, read as a careful model reads them (agent.py's INSTRUCTION)."""

    threshold: Decimal
    most: Decimal

    @classmethod
    def of(cls, request: LlmRequest) -> _Limits:
        said = str(request.config.system_instruction or "") if request.config else ""
        found = {name: _INSTRUCTED[name].search(said) for name in _INSTRUCTED}
        return cls(*(Decimal(m.group(1).replace(",", "")) if m else default
                     for m, default in zip(found.values(), (Decimal(100), Decimal(1_000_000)), strict=True)))


# "Up to $100: call reimburse", "at most $1,000,000": what the instruction says the limits are.
_INSTRUCTED = {"threshold": re.compile(r"Up to \$([0-9,]+(?:\.[0-9]+)?)"),
               "most": re.compile(r"at most \$([0-9,]+(?:\.[0-9]+)?)")}


# A tool call carries the amount as a float, which holds any figure of up to
# 15 digits exactly; MAX_REIMBURSEMENT is at most $1,000,000,000.
_FLOAT_EXACT_BELOW = Decimal(10) ** 13


def _refused(amount: Decimal, limits: _Limits) -> str | None:
    """The amount rule's refusal (ledger/inputs.py) of a figure no tool call could carry exactly, or None.

    Any other amount goes to the tool, which applies the same rule and says
    why it refuses; a larger one would reach it rounded, so it is answered here.
    """
    if amount.copy_abs() < _FLOAT_EXACT_BELOW:  # copy_abs: exact, however long the figure
        return None
    try:
        inputs.amount(amount, most=limits.most)
    except inputs.AmountError as error:
        return f"{error} Nothing was paid and no ticket was opened."
    return None


def _tool_names(request: LlmRequest) -> set[str]:
    names: set[str] = set()
    for tool in (request.config.tools or []) if request.config else []:
        for declaration in getattr(tool, "function_declarations", None) or []:
            names.add(declaration.name)
    return names


def _money(value: Any) -> str:
    return f"${Decimal(str(value)):,.2f}"


def _call(name: str, **args: Any) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=args))


def _text(text: str) -> types.Part:
    return types.Part(text=text)


def _answers(contents: list[types.Content], index: int) -> list[_Answer]:
    """The function responses of `contents[index]`, each with the call it answers.

    ADK sends every response right after the turn that made the calls, and
    strips its own call ids on the way to the model; calls of one name are
    then paired with their responses in order, as Gemini pairs them.
    """
    calls = [p.function_call for p in (contents[index - 1].parts or []) if p.function_call] if index else []
    answers = []
    for part in contents[index].parts or []:
        response = part.function_response
        if response is None:
            continue
        call = next((c for c in calls if response.id and c.id == response.id), None) or next(
            (c for c in calls if c.name == response.name), None)
        if call is None:
            call = types.FunctionCall(name=response.name, args={})
        else:
            calls.remove(call)
        answers.append(_Answer(call, dict(response.response or {})))
    return answers


def _tickets(contents: list[types.Content]) -> dict[str, _Answer]:
    """Every approval ticket of the conversation, by id, in its latest known state."""
    tickets: dict[str, _Answer] = {}
    for index in range(len(contents)):
        for answer in _answers(contents, index):
            if answer.call.name == APPROVAL_TOOL and answer.response.get("ticket_id"):
                tickets[answer.response["ticket_id"]] = answer
            elif answer.call.name == WITHDRAW_TOOL and answer.status == "withdrawn":
                ticket = tickets.get(str(answer.response.get("ticket_id")))
                if ticket is not None:
                    tickets[ticket.response["ticket_id"]] = _Answer(ticket.call, answer.response)
    return tickets


# --- after tool results ------------------------------------------------------------


def _after_answers(contents: list[types.Content], tools: set[str]) -> list[types.Part]:
    answers = _answers(contents, len(contents) - 1)
    decided = [a for a in answers if a.call.name == APPROVAL_TOOL and a.status != "pending"
               and not a.response.get("payout_id")]
    # A decision arrives beside the latest answers to the other calls of its
    # turn; those were news when that turn was answered, and are not now.
    pending = [] if decided else [a for a in answers if a.call.name == APPROVAL_TOOL and a.status == "pending"]
    others = [] if decided else [a for a in answers if a.call.name != APPROVAL_TOOL]
    parts = [_after_approval(a, tools) for a in decided + pending]
    parts += [_after_tool(a, contents, tools) for a in others]
    # Text first, then any calls: one turn may do both.
    return [p for p in parts if p.text] + [p for p in parts if p.function_call] or [_text("Done.")]


def _after_approval(answer: _Answer, tools: set[str]) -> types.Part:
    response, status = answer.response, answer.status
    ticket = response.get("ticket_id", "the ticket")
    what = f"{_money(answer.amount)} ({answer.purpose})" if answer.amount else answer.purpose
    if status == "pending" and response.get("why"):
        # Why it needs approval (the daily rules), or two approvers (split requests): say so.
        return _text(f"{response['why']} I've opened ticket {ticket} for {what}; it is waiting for "
                     "approval, and I will pay it once it is approved.")
    if status == "pending":
        return _text(f"Your request for {what} needs approval. Ticket {ticket} is waiting for an "
                     "approver; I will pay it once it is approved.")
    if status == "approved" and REIMBURSE_TOOL in tools and answer.amount:
        # An approver may approve less than was asked: pay what was approved.
        return _call(REIMBURSE_TOOL, purpose=answer.purpose, amount=response.get("amount", answer.amount))
    if status == "rejected":
        reason = response.get("reason") or "no reason given"
        return _text(f"Ticket {ticket} for {what} was rejected by {response.get('by', 'the approver')} "
                     f"({reason}). Nothing was paid.")
    if status == "expired":
        return _text(f"Ticket {ticket} for {what} expired before anyone decided it. Nothing was paid; "
                     "ask again if you still need the reimbursement.")
    if status == "withdrawn":
        return _text(f"Ticket {ticket} for {what} is withdrawn; nothing was paid.")
    if status == "error":
        return _text(f"I could not open an approval ticket for {what}: {response.get('error')}")
    return _text(f"The approval for ticket {ticket} came back as {status!r}. Nothing was paid.")


def _after_tool(answer: _Answer, contents: list[types.Content], tools: set[str]) -> types.Part:
    response, status = answer.response, answer.status
    if answer.call.name == REIMBURSE_TOOL and status == "needs_approval":
        # Ask for approval of the very same request.
        if APPROVAL_TOOL in tools and answer.amount:
            return _call(APPROVAL_TOOL, purpose=answer.purpose, amount=answer.amount)
        return _text(f"I could not pay it: {response.get('message', 'it needs an approver')}")
    if answer.call.name == REIMBURSE_TOOL and status == "paid":
        return _text(f"Done: {_money(response['amount'])} for {answer.purpose} was paid "
                     f"(payout {response['payout_id']}).{_lowered(answer, contents)}")
    if answer.call.name == REIMBURSE_TOOL and status == "already_paid":
        return _text(f"That expense was already paid (payout {response['payout_id']}); nothing more was paid.")
    if answer.call.name == REIMBURSE_TOOL:
        return _text(f"I could not pay it: {response.get('error', status)}")
    if answer.call.name == WITHDRAW_TOOL and status == "withdrawn":
        ticket = _tickets(contents).get(str(response.get("ticket_id")))
        what = f" for {_money(ticket.amount)} ({ticket.purpose})" if ticket and ticket.amount else ""
        return _text(f"Withdrawn: ticket {response['ticket_id']}{what} will not be decided, and nothing "
                     "will be paid for it.")
    if answer.call.name == WITHDRAW_TOOL:
        return _text(f"I could not withdraw it: {response.get('error', status)}")
    return _text(f"{answer.call.name} returned: {json.dumps(response, default=str)}")


def _lowered(paid: _Answer, contents: list[types.Content]) -> str:
    """What to say when the approver approved less than was asked, for the very ticket just paid."""
    ticket = _tickets(contents).get(str(paid.response.get("ticket_id")))
    asked = ticket.response.get("asked") if ticket else None
    if ticket is None or ticket.status != "approved" or not asked:
        return ""
    reason = ticket.response.get("reason")
    return (f" {ticket.response.get('by', 'The approver')} approved {_money(ticket.response['amount'])} "
            f"of the {_money(asked)} you asked" + (f": {reason}." if reason else "."))


# --- after a message ----------------------------------------------------------------


def _answer_user(contents: list[types.Content], text: str, request: LlmRequest) -> list[types.Part]:
    tools, limits = _tool_names(request), _Limits.of(request)
    if _WITHDRAW_WORDS.search(text) and not find_money(text) and WITHDRAW_TOOL in tools:
        return [_withdraw(contents, text)]
    several = find_expenses(text)
    if isinstance(several, str):
        return [_text(several)]
    if several:
        return [_pay_or_ask(expense, tools, limits) for expense in several]
    found = find_amount(text)
    if isinstance(found, str):
        return [_text(found)]
    purpose = find_purpose(text, found[1] if found else None)
    if found and not purpose:
        # The purpose may have come in an earlier message ("reimburse lunch"); one
        # that named an amount too was another request, or was sent back as unclear.
        for earlier in reversed(_user_texts(contents)[:-1]):
            purpose = find_purpose(earlier, None) if not find_money(earlier) else None
            if purpose:
                break
    if found is None:
        if _EXPENSE_WORDS.search(text) or purpose:
            return [_text("How much was it? Give the amount in US dollars, e.g. $250.")]
        if news := _latest_news(contents):
            return [_text(news)]
        return [_text(
            "I handle expense reimbursements. Tell me what you spent and how much, e.g. "
            f"'Reimburse $45 for a taxi' (paid at once, up to {_money(limits.threshold)}) or "
            "'Reimburse $250 for the team lunch' (needs an approver first)."
        )]
    amount, _span = found
    if refusal := _refused(amount, limits):
        return [_text(refusal)]
    if not purpose:
        return [_text(f"What was the {_money(abs(amount))} for?")]
    return [_pay_or_ask(Expense(amount, purpose), tools, limits)]


def _pay_or_ask(expense: Expense, tools: set[str], limits: _Limits) -> types.Part:
    # Without ask_for_approval to call, reimburse is the only way to pay: an agent
    # whose reimburse waits for ADK's tool confirmation above the limit (see
    # benchmarks/confirmation.py) gets the large amount through reimburse too.
    if refusal := _refused(expense.amount, limits):
        return _text(refusal)
    large = expense.amount > limits.threshold and APPROVAL_TOOL in tools
    tool = APPROVAL_TOOL if large else REIMBURSE_TOOL
    if tool not in tools:
        return _text(f"I cannot do that here: the {tool} tool is not available.")
    return _call(tool, purpose=expense.purpose, amount=float(expense.amount))


def _withdraw(contents: list[types.Content], text: str) -> types.Part:
    """"Cancel my conference ticket request": the one pending ticket the message points at, or a question."""
    waiting = {tid: t for tid, t in _tickets(contents).items() if t.status == "pending"}
    named = [tid for tid in _TICKET_ID.findall(text) if tid in waiting]
    if not named:
        words = {w for w in re.findall(r"[^\W\d_]{3,}", text.casefold())}
        named = [tid for tid, t in waiting.items() if words & set(re.findall(r"[^\W\d_]{3,}", t.purpose.casefold()))]
    if not named and len(waiting) == 1:
        named = list(waiting)
    if len(named) == 1:
        return _call(WITHDRAW_TOOL, ticket_id=named[0])
    if not waiting:
        return _text("You have no request waiting for an approver in this conversation, so there is nothing "
                     "to withdraw.")
    listed = "; ".join(f"{tid}: {_money(t.amount)} for {t.purpose}" for tid, t in waiting.items())
    return _text(f"Which request should I withdraw? Waiting: {listed}. Name the ticket or what it was for.")


def _latest_news(contents: list[types.Content]) -> str | None:
    """The state of the conversation's approvals, for "any news?".

    A decision may have been delivered by another process since the user
    last wrote (`adk run` does not show it until they do).
    """
    tickets = _tickets(contents)
    pending = {tid: t for tid, t in tickets.items() if t.status == "pending" and t.amount}
    waiting = [f"Ticket {tid} for {_money(t.amount)} ({t.purpose})" for tid, t in pending.items()
               if not t.response.get("approvals")]
    news = [" ".join(waiting) + (" is" if len(waiting) == 1 else " are") + " still waiting for an approver"] \
        if waiting else []
    # The two-person rule: the first of two approvals arrived as an update of the pending call.
    news += [f"Ticket {tid} for {_money(t.amount)} ({t.purpose}) has {t.response['approvals']} approvals and "
             "waits for a second approver" for tid, t in pending.items() if t.response.get("approvals")]
    if news:
        return "; ".join(news) + "; I will pay once approved."
    for index in range(len(contents) - 1, -1, -1):
        for answer in reversed(_answers(contents, index)):
            if answer.call.name == REIMBURSE_TOOL and answer.status == "paid":
                return f"Latest news: {_after_tool(answer, contents, set()).text}"
            if answer.call.name == APPROVAL_TOOL and answer.status in ("rejected", "expired", "withdrawn"):
                return f"Latest news: {_after_approval(answer, set()).text}"
    return None


def _user_texts(contents: list[types.Content]) -> list[str]:
    return [
        " ".join(p.text for p in c.parts or [] if p.text and not p.thought)
        for c in contents
        if c.role == "user" and any(p.text and not p.thought for p in c.parts or [])
    ]


def next_turn(request: LlmRequest) -> list[types.Part]:
    """The next model turn for `request`: a text, one or more function calls, or both."""
    contents = [c for c in request.contents if c.parts]
    if not contents:
        return _answer_user([], "", request)
    if any(p.function_response for p in contents[-1].parts or []):
        return _after_answers(contents, _tool_names(request))
    texts = _user_texts([contents[-1]])
    return _answer_user(contents, texts[0] if texts else "", request)


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

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        parts = next_turn(llm_request)
        prompt_chars = sum(len(str(c.model_dump(exclude_none=True))) for c in llm_request.contents)
        output_chars = sum(len(str(p.model_dump(exclude_none=True))) for p in parts)
        yield LlmResponse(
            content=types.Content(role="model", parts=parts),
            partial=False,
            turn_complete=True,
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=prompt_chars // 4,
                candidates_token_count=output_chars // 4,
                total_token_count=(prompt_chars + output_chars) // 4,
            ),
        )


LLMRegistry.register(OfflineExpenseModel)
