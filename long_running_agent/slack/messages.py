"""What approvers see in Slack: each event's text, Block Kit messages with Approve, Reject and Approve less.

Pure functions of a ticket as the webhook shows it (docs/notifications.md), so the outbox draws a message when it
sends it. docs/slack.md shows a real message of each kind; a test keeps them current.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from ..ledger.inputs import MAX_REASON
from ..ledger.need import EVERYONE, counted_words, need_words
from ..ledger.policy.request_totals import day_in_words
from ..settings import Settings

# The buttons' action ids and the forms' callback ids: what a click or a submission says it is.
APPROVE, REJECT, APPROVE_LESS = "approve", "reject", "approve_less"
# Without a bot token, Reject and Approve less are links to the inbox; Slack still reports the click.
IN_INBOX = "_in_inbox"
# The inputs of the forms (block id = action id).
REASON, AMOUNT = "reason", "amount"
# The outbox's Slack replies (docs/slack.md), POSTed to the response_url they carry.
SLACK_UPDATE, SLACK_REPLY = "slack.update", "slack.reply"

EVENTS = {
    "ticket.requested": "{who} asks for {what}: ticket {id}{needs}.",
    # An approval short of the tier's need: the first, and each later one (the progress says what is missing).
    "ticket.first_approval": "{latest} approved ticket {id} ({what}, from {who}): {progress}.",
    "ticket.approval": "{latest} approved ticket {id} ({what}, from {who}): {progress}.",
    "ticket.approved": "Ticket {id} ({what}, from {who}) was approved by {by}.",
    "ticket.rejected": "Ticket {id} ({what}, from {who}) was rejected by {by}: {reason}.",
    "ticket.expired": "Ticket {id} ({what}, from {who}) expired before anyone decided it.",
    "ticket.withdrawn": "Ticket {id} ({what}) was withdrawn by {who}, who asked for it.",
    "ticket.reminder": "Reminder: ticket {id} ({what}, from {who}) expires at {expires} UTC{needs}.",
    "ticket.escalated": "Escalated to {escalated}: ticket {id} ({what}, from {who}) expires at {expires} UTC.",
}


def slack_text(text: str | None) -> str:
    """`text` from a user, safe in a Slack message: its markup shown, never obeyed.

    Slack reads `<!channel>` as a mention of everyone and `<https://…|words>` as a link disguised as `words`.
    """
    return (text or "").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def event_text(event: str, ticket: dict[str, Any]) -> str:
    """The human `text` of a webhook about `ticket` (its JSON, `ticket_fields`); what users wrote, escaped."""
    approved = ticket.get("approved_amount")
    amount = _dollars(approved if approved is not None else ticket["amount"])
    needs = f"; {progress}" if (progress := _progress(ticket)) else ""
    if event == "ticket.requested":
        needs = f"; it needs {_need_words(ticket)}"
        if ticket.get("combined_amount") is not None:
            needs += f" ({_dollars(ticket['combined_amount'])} with {slack_text(ticket['requester'])}'s others today)"
    if approved is not None and event == "ticket.approved":
        amount = f"{amount} of the {_dollars(ticket['amount'])} asked"
    approved_by = ticket.get("approved_by") or []
    return EVENTS[event].format(
        id=ticket["id"], who=slack_text(ticket["requester"]), what=f"{amount} for {slack_text(ticket['purpose'])}",
        needs=needs, latest=slack_text(approved_by[-1] if approved_by else None), progress=progress or "",
        by=_approved_by(ticket) if ticket["status"] == "approved" else slack_text(ticket.get("decided_by")),
        reason=slack_text(ticket.get("reason")),
        expires=f"{datetime.fromisoformat(ticket['expires_at']):%Y-%m-%d %H:%M}",
        escalated=slack_text(",".join(ticket.get("escalated_to") or [])),
    )


def _progress(ticket: dict[str, Any]) -> str | None:
    """What a pending ticket still needs ("1 of 2: needs 1 more from cfo"); None when one approval from anyone does."""
    if ticket["status"] != "pending":
        return None
    if "need" not in ticket:  # a notification written by an earlier release
        return ticket.get("approvals")
    return slack_text(ticket.get("missing")) if ticket["need"] != {EVERYONE: 1} else None


def _need_words(ticket: dict[str, Any]) -> str:
    """"an approver", "2 approvers", or "1 from finance and 1 from cfo"."""
    need = ticket.get("need") or {EVERYONE: 2 if ticket.get("approvals") else 1}
    return "an approver" if need == {EVERYONE: 1} else slack_text(need_words(tuple(need.items())))


def _approved_by(ticket: dict[str, Any]) -> str:
    """"bob and carol", or "bob for finance and carol for cfo", escaped."""
    counted = {c["approver"]: c["group"] for c in ticket.get("counted_for") or []}
    return slack_text(counted_words(counted) if counted else " and ".join(ticket["approved_by"]))


@dataclass(frozen=True)
class Buttons:
    """Where Reject and Approve less go: a form in Slack (with a bot token), or the ticket on the inbox page."""

    forms: bool
    inbox_url: str | None = None

    @classmethod
    def of(cls, settings: Settings) -> Buttons:
        inbox = settings.slack_inbox_url
        return cls(forms=settings.slack_bot_token is not None, inbox_url=str(inbox) if inbox else None)

    def link(self, ticket_id: str) -> str:
        return f"{(self.inbox_url or '').rstrip('#')}#{ticket_id}"


def _dollars(amount: float | int | str) -> str:
    return f"${Decimal(str(amount)):,.2f}"


def _payable(ticket: dict[str, Any]) -> str:
    """What Approve pays: the amount asked, or "$5,500.00 of the $6,000.00 asked" after a first approval for less."""
    approved, asked = ticket.get("approved_amount"), _dollars(ticket["amount"])
    return asked if approved is None else f"{_dollars(approved)} of the {asked} asked"


def _plain(text: str, limit: int = 75) -> dict[str, Any]:
    return {"type": "plain_text", "text": text[:limit], "emoji": False}


def _summary(ticket: dict[str, Any]) -> str:
    """"alice asks for $250.00 for team lunch", escaped."""
    return (f"{slack_text(ticket['requester'])} asks for {_dollars(ticket['amount'])} for "
            f"{slack_text(ticket['purpose'])}")


def _fields(ticket: dict[str, Any]) -> list[dict[str, Any]]:
    expires = datetime.fromisoformat(ticket["expires_at"])
    fields = [
        f"*Requester*\n{slack_text(ticket['requester'])}",
        f"*Amount*\n{_payable(ticket)}",
        f"*Purpose*\n{slack_text(ticket['purpose'])}",
        f"*Ticket*\n{ticket['id']}",
        f"*Expires*\n{expires:%Y-%m-%d %H:%M} UTC",
    ]
    if progress := _progress(ticket) or ticket.get("approvals"):
        fields.append(f"*Approvals*\n{progress}")
    if ticket.get("requester_today") and (day := day_in_words(ticket["requester_today"], slack_text)):
        fields.append(f"*{slack_text(ticket['requester'])} today*\n{day}")
    return [{"type": "mrkdwn", "text": text} for text in fields]


def _buttons(ticket: dict[str, Any], buttons: Buttons) -> dict[str, Any]:
    ticket_id = ticket["id"]
    approve = {
        "type": "button", "action_id": APPROVE, "value": ticket_id, "style": "primary", "text": _plain("Approve"),
        "confirm": {
            "title": _plain("Approve this expense?"),
            "text": _plain(f"{ticket['requester']}: {_payable(ticket)} for {ticket['purpose']}", 300),
            "confirm": _plain("Approve"), "deny": _plain("Cancel"),
        },
    }
    reject: dict[str, Any] = {"type": "button", "action_id": REJECT, "value": ticket_id, "style": "danger",
                              "text": _plain("Reject")}
    less: dict[str, Any] = {"type": "button", "action_id": APPROVE_LESS, "value": ticket_id,
                            "text": _plain("Approve less")}
    if not buttons.forms:
        # A reason (and an amount) is written on the inbox page, where the ticket is.
        for button in (reject, less):
            button["action_id"] += IN_INBOX
            button["url"] = buttons.link(ticket_id)
    return {"type": "actions", "block_id": "decide", "elements": [approve, reject, less]}


def notification_blocks(event: dict[str, Any], buttons: Buttons) -> list[dict[str, Any]]:
    """The blocks of a webhook's message: its text, the ticket, and its buttons while it is pending."""
    ticket = event["ticket"]
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": event["text"]}},
        {"type": "section", "fields": _fields(ticket)},
    ]
    if ticket["status"] == "pending":
        blocks.append(_buttons(ticket, buttons))
    return blocks


def outcome(ticket: dict[str, Any], payout: dict[str, Any] | None) -> str | None:
    """What became of the ticket, in one line; None while it waits for its first approval."""
    status = ticket["status"]
    if status == "approved":
        line = f"Approved by {_approved_by(ticket) or slack_text(ticket['decided_by'])}"
        if payout is None:
            return f"{line} · not paid yet"
        paid = _dollars(payout["amount"])
        if ticket.get("approved_amount") is not None:
            paid += f" of the {_dollars(ticket['amount'])} asked"
        return f"{line} · paid {paid} · {payout['id']}"
    if status == "rejected":
        return f"Rejected by {slack_text(ticket['decided_by'])}: {slack_text(ticket['reason'])}"
    if status == "withdrawn":
        return "Withdrawn"
    if status == "expired":
        return "Expired"
    if ticket["approved_by"]:
        less = f", {_payable(ticket)}" if ticket.get("approved_amount") is not None else ""
        return f"{_progress(ticket)}; approved by {_approved_by(ticket)}{less}"
    return None


def updated_message(ticket: dict[str, Any], payout: dict[str, Any] | None, buttons: Buttons) -> dict[str, Any]:
    """The message that replaces the one clicked: the ticket as it stands; its buttons only while nothing is decided."""
    line = outcome(ticket, payout)
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": _summary(ticket)}},
        {"type": "section", "fields": _fields(ticket)},
    ]
    if line is None:
        blocks.append(_buttons(ticket, buttons))
    else:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"*{line}*"}]})
    return {"replace_original": True, "text": f"{_summary(ticket)}: {line or 'waiting for an approver'}",
            "blocks": blocks}


def decision_form(kind: str, ticket: dict[str, Any], response_url: str) -> dict[str, Any]:
    """The modal of Reject (a reason) or Approve less (an amount and a reason), for views.open.

    `private_metadata` carries the ticket and the response_url: a submission has none, and Slack signs it back.
    """
    inputs = []
    if kind == APPROVE_LESS:
        inputs.append({
            "type": "input", "block_id": AMOUNT,
            "label": _plain(f"Amount to pay (at most {_dollars(ticket.get('approved_amount') or ticket['amount'])})"),
            "element": {"type": "plain_text_input", "action_id": AMOUNT, "placeholder": _plain("e.g. 200")},
        })
    inputs.append({
        "type": "input", "block_id": REASON, "label": _plain("Reason (the requester sees it)"),
        "element": {"type": "plain_text_input", "action_id": REASON, "multiline": True, "max_length": MAX_REASON},
    })
    return {
        "type": "modal", "callback_id": kind,
        "title": _plain("Reject" if kind == REJECT else "Approve less", 24),
        "submit": _plain("Reject" if kind == REJECT else "Approve"), "close": _plain("Cancel"),
        "private_metadata": json.dumps({"ticket": ticket["id"], "response_url": response_url}),
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": f"{_summary(ticket)} ({ticket['id']})"}},
                   *inputs],
    }


def ephemeral(text: str) -> dict[str, Any]:
    """A reply through a response_url that only the person who clicked sees; the message stays as it is."""
    return {"response_type": "ephemeral", "replace_original": False, "text": text}
