"""What the offline model (offline.py) reads of the tools' answers: it pays what was approved, or words the outcome."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from google.genai import types

from ..ledger.inputs import exact_amount
from ..names import APPROVAL_TOOL, REIMBURSE_TOOL, WITHDRAW_TOOL


@dataclass
class Answer:
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


def dollars(value: Any) -> str:
    """An amount as "$1,250.00"; a response's amount is read as the guard and `reimburse` read it (ledger/inputs.py)."""
    return f"${exact_amount(value):,.2f}"


def call_tool(name: str, **args: Any) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=args))


def say(text: str) -> types.Part:
    return types.Part(text=text)


def answers(contents: list[types.Content], index: int) -> list[Answer]:
    """The function responses of `contents[index]`, each with the call it answers.

    ADK sends every response right after the turn that made the calls, and strips its own call ids on the
    way to the model; calls of one name are then paired with their responses in order, as Gemini pairs them.
    """
    calls = [p.function_call for p in (contents[index - 1].parts or []) if p.function_call] if index else []
    found = []
    for response in [p.function_response for p in contents[index].parts or [] if p.function_response]:
        call = next((c for c in calls if response.id and c.id == response.id), None) or next(
            (c for c in calls if c.name == response.name), None)
        if call is not None:
            calls.remove(call)
        found.append(Answer(call or types.FunctionCall(name=response.name, args={}), dict(response.response or {})))
    return found


def tickets(contents: list[types.Content]) -> dict[str, Answer]:
    """Every approval ticket of the conversation, by id, in its latest known state."""
    known: dict[str, Answer] = {}
    for index in range(len(contents)):
        for answer in answers(contents, index):
            if answer.call.name == APPROVAL_TOOL and answer.response.get("ticket_id"):
                known[answer.response["ticket_id"]] = answer
            elif answer.call.name == WITHDRAW_TOOL and answer.status == "withdrawn":
                ticket = known.get(str(answer.response.get("ticket_id")))
                if ticket is not None:
                    known[ticket.response["ticket_id"]] = Answer(ticket.call, answer.response)
    return known


def after_answers(contents: list[types.Content], tools: set[str]) -> list[types.Part]:
    """The turn after the tools answered: the latest content of `contents` holds their responses."""
    latest = answers(contents, len(contents) - 1)
    decided = [a for a in latest if a.call.name == APPROVAL_TOOL and a.status != "pending"
               and not a.response.get("payout_id")]
    # A decision arrives beside the latest answers to its turn's other calls: news then, not now.
    pending = [] if decided else [a for a in latest if a.call.name == APPROVAL_TOOL and a.status == "pending"]
    others = [] if decided else [a for a in latest if a.call.name != APPROVAL_TOOL]
    parts = [_after_approval(a, tools) for a in decided + pending]
    parts += [_after_tool(a, contents, tools) for a in others]
    # Text first, then any calls: one turn may do both.
    return [p for p in parts if p.text] + [p for p in parts if p.function_call] or [say("Done.")]


def _after_approval(answer: Answer, tools: set[str]) -> types.Part:
    response, status = answer.response, answer.status
    ticket = response.get("ticket_id", "the ticket")
    what = f"{dollars(answer.amount)} ({answer.purpose})" if answer.amount else answer.purpose
    if status == "pending" and response.get("why"):
        return say(f"{response['why']} I've opened ticket {ticket} for {what}; it is waiting for "
                   "approval, and I will pay it once it is approved.")
    if status == "pending":
        return say(f"Your request for {what} needs approval. Ticket {ticket} is waiting for an "
                   "approver; I will pay it once it is approved.")
    if status == "approved" and REIMBURSE_TOOL in tools and answer.amount:
        # An approver may approve less than was asked: pay what was approved.
        return call_tool(REIMBURSE_TOOL, purpose=answer.purpose, amount=response.get("amount", answer.amount))
    if status == "rejected":
        reason = response.get("reason") or "no reason given"
        return say(f"Ticket {ticket} for {what} was rejected by {response.get('by', 'the approver')} "
                   f"({reason}). Nothing was paid.")
    if status == "expired":
        return say(f"Ticket {ticket} for {what} expired before anyone decided it. Nothing was paid; "
                   "ask again if you still need the reimbursement.")
    if status == "withdrawn":
        return say(f"Ticket {ticket} for {what} is withdrawn; nothing was paid.")
    if status == "error":
        return say(f"I could not open an approval ticket for {what}: {response.get('error')}")
    return say(f"The approval for ticket {ticket} came back as {status!r}. Nothing was paid.")


def _after_tool(answer: Answer, contents: list[types.Content], tools: set[str]) -> types.Part:
    response, status, name = answer.response, answer.status, answer.call.name
    if name == REIMBURSE_TOOL and status == "needs_approval":
        if APPROVAL_TOOL in tools and answer.amount:
            return call_tool(APPROVAL_TOOL, purpose=answer.purpose, amount=answer.amount)
        return say(f"I could not pay it: {response.get('message', 'it needs an approver')}")
    if name == REIMBURSE_TOOL and status == "paid":
        return say(f"Done: {dollars(response['amount'])} for {answer.purpose} was paid "
                   f"(payout {response['payout_id']}).{_lowered(answer, contents)}")
    if name == REIMBURSE_TOOL and status == "already_paid":
        return say(f"That expense was already paid (payout {response['payout_id']}); nothing more was paid.")
    if name == REIMBURSE_TOOL:
        return say(f"I could not pay it: {response.get('error', status)}")
    if name == WITHDRAW_TOOL and status == "withdrawn":
        ticket = tickets(contents).get(str(response.get("ticket_id")))
        what = f" for {dollars(ticket.amount)} ({ticket.purpose})" if ticket and ticket.amount else ""
        return say(f"Withdrawn: ticket {response['ticket_id']}{what} will not be decided, and nothing "
                   "will be paid for it.")
    if name == WITHDRAW_TOOL:
        return say(f"I could not withdraw it: {response.get('error', status)}")
    return say(f"{name} returned: {json.dumps(response, default=str)}")


def _lowered(paid: Answer, contents: list[types.Content]) -> str:
    """What to say when the approver approved less than was asked, for the very ticket just paid."""
    ticket = tickets(contents).get(str(paid.response.get("ticket_id")))
    asked = ticket.response.get("asked") if ticket else None
    if ticket is None or ticket.status != "approved" or not asked:
        return ""
    reason = ticket.response.get("reason")
    return (f" {ticket.response.get('by', 'The approver')} approved {dollars(ticket.response['amount'])} "
            f"of the {dollars(asked)} you asked" + (f": {reason}." if reason else "."))


def latest_news(contents: list[types.Content]) -> str | None:
    """For "any news?": the state of the approvals, which another process may have decided since the user wrote."""
    pending = {tid: t for tid, t in tickets(contents).items() if t.status == "pending" and t.amount}
    waiting = [f"Ticket {tid} for {dollars(t.amount)} ({t.purpose})" for tid, t in pending.items()
               if not t.response.get("approvals")]
    news = [" ".join(waiting) + (" is" if len(waiting) == 1 else " are") + " still waiting for an approver"] \
        if waiting else []
    # More than one approval needed: the approvals so far arrived as an update of the pending call.
    news += [f"Ticket {tid} for {dollars(t.amount)} ({t.purpose}) has {t.response['approvals']} approvals and "
             "waits for another approver" for tid, t in pending.items() if t.response.get("approvals")]
    if news:
        return "; ".join(news) + "; I will pay once approved."
    for index in range(len(contents) - 1, -1, -1):
        for answer in reversed(answers(contents, index)):
            if answer.call.name == REIMBURSE_TOOL and answer.status == "paid":
                return f"Latest news: {_after_tool(answer, contents, set()).text}"
            if answer.call.name == APPROVAL_TOOL and answer.status in ("rejected", "expired", "withdrawn"):
                return f"Latest news: {_after_approval(answer, set()).text}"
    return None
