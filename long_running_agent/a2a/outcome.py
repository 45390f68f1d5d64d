"""What an A2A task says, read from the ledger each time: the ticket's status decides the task's state.

| Ticket                         | Task state   | Status message, and artifact                                  |
|--------------------------------|--------------|---------------------------------------------------------------|
| the agent's turn still running | `working`    | "Working on it."                                              |
| none opened (answered, paid)   | `completed`  | the agent's reply; a payout artifact for each payout it made  |
| pending (approvers deciding)   | `working`    | the ticket: id, amount, what is still missing, expiry         |
| approved, not yet paid         | `working`    | the ticket, approved, with who approved                       |
| approved and paid              | `completed`  | the payout artifact: payout id, amount paid, approvers        |
| rejected                       | `rejected`   | the reason                                                    |
| withdrawn, or expired          | `canceled`   | which of the two, and when                                    |
| the turn failed                | `failed`     | why                                                           |

`working`, not `input-required`, while approvers decide: in A2A `input-required` asks the task's owner, the requester's
agent, to answer, and the requester must never answer its own approval (docs/a2a.md).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from a2a.types import Artifact, Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf import json_format, struct_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from ..ledger import Payout, Ticket, TicketStatus
from .records import TaskRecord

# A turn not finished this long after it began was cut short (its server stopped): the task says failed.
INTERRUPTED_AFTER = timedelta(minutes=10)
TERMINAL = (TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_REJECTED, TaskState.TASK_STATE_CANCELED,
            TaskState.TASK_STATE_FAILED)
_ENDED = {TicketStatus.REJECTED: TaskState.TASK_STATE_REJECTED, TicketStatus.WITHDRAWN: TaskState.TASK_STATE_CANCELED,
          TicketStatus.EXPIRED: TaskState.TASK_STATE_CANCELED}


def _data(value: dict[str, Any]) -> Part:
    return Part(data=json_format.ParseDict(value, struct_pb2.Value()), media_type="application/json")


def ticket_part(ticket: Ticket) -> dict[str, Any]:
    """The ticket as the task shows it, as data: what a requester's agent reads instead of parsing words."""
    missing = {"missing": ticket.still_missing} if ticket.still_missing else {}
    return {"ticket": ticket.as_record() | missing}


def payout_artifact(payout: Payout, approvers: list[str]) -> Artifact:
    record = payout.as_record() | {"approved_by": approvers}
    return Artifact(artifact_id=payout.id, name="payout", description=f"{payout.amount_text} paid",
                    parts=[Part(text=f"Paid {payout.amount_text} for {payout.purpose} (payout {payout.id})."),
                           _data({"payout": record})])


def _words(ticket: Ticket) -> str:
    if ticket.status is TicketStatus.PENDING:
        return (f"Ticket {ticket.id} for {ticket.amount_text} ({ticket.purpose}) waits for approvers: "
                f"{ticket.still_missing}. It expires {ticket.expires_at.isoformat(timespec='seconds')}.")
    if ticket.status is TicketStatus.APPROVED:
        return f"Ticket {ticket.id} was approved by {' and '.join(ticket.approvers)}; the payout is being made."
    if ticket.status is TicketStatus.REJECTED:
        return f"Ticket {ticket.id} was rejected by {ticket.decided_by}: {ticket.reason or 'no reason given'}."
    if ticket.status is TicketStatus.WITHDRAWN:
        return f"Ticket {ticket.id} was withdrawn; nothing was paid."
    expired = ticket.expires_at.isoformat(timespec="seconds")
    return f"Ticket {ticket.id} expired at {expired} undecided; nothing was paid."


def task_of(record: TaskRecord, ticket: Ticket | None, payouts: list[Payout], now: datetime) -> Task:
    """The task as the ledger has it now (the table above)."""
    parts: list[Part] = []
    artifacts: list[Artifact] = []
    if record.error:
        state, parts = TaskState.TASK_STATE_FAILED, [Part(text=record.error)]
    elif record.finished_at is None and now - record.created_at > INTERRUPTED_AFTER:  # its server stopped mid-turn
        state, parts = TaskState.TASK_STATE_FAILED, [Part(text=(
            "The agent's turn was cut short (its server stopped) before it ended. Ask again with a new messageId, "
            "in the same contextId: the conversation shows any ticket it opened."))]
    elif record.finished_at is None:
        state, parts = TaskState.TASK_STATE_WORKING, [Part(text="Working on it.")]
    elif ticket is None:
        state, parts = TaskState.TASK_STATE_COMPLETED, [Part(text=record.reply or "Done.")]
        artifacts = [payout_artifact(payout, []) for payout in payouts]
    else:
        paid = [payout for payout in payouts if payout.ticket_id == ticket.id]
        if ticket.status is TicketStatus.APPROVED and paid:
            state = TaskState.TASK_STATE_COMPLETED
            artifacts = [payout_artifact(payout, ticket.approvers) for payout in paid]
            parts = [Part(text=f"Ticket {ticket.id} was approved by {' and '.join(ticket.approvers)} and "
                               f"{paid[0].amount_text} was paid (payout {paid[0].id}).")]
        else:
            state = _ENDED.get(ticket.status, TaskState.TASK_STATE_WORKING)
            parts = [Part(text=_words(ticket))]
        why = {TicketStatus.WITHDRAWN: "withdrawn", TicketStatus.EXPIRED: "expired"}.get(ticket.status)
        parts.append(_data(ticket_part(ticket) | ({"canceled_because": why} if why else {})))
    stamp = Timestamp()
    stamp.FromDatetime(now)
    message = Message(message_id=f"{record.id}:{TaskState.Name(state)}", role=Role.ROLE_AGENT, parts=parts,
                      task_id=record.id, context_id=record.context_id)
    return Task(id=record.id, context_id=record.context_id, artifacts=artifacts,
                status=TaskStatus(state=state, message=message, timestamp=stamp))
