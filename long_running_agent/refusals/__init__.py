"""Every refusal a person can meet, defined once: a stable code, what happened, and what to do next.

Like an HTTP status registry: the domain raises them, and the CLI, the API, the inbox and the chat only render
them, each wording a next step's actions its own way (`Actions`): ".venv/bin/expenses deliver T-..." or
"POST /api/approvals/T-.../deliver". A code never changes; wording may (docs/security.md).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Protocol

from ..names import EXPENSES, TicketStatus


@dataclass(frozen=True)
class Actions:
    """How one surface words each action a next step can name; `{ticket}` stands for the ticket's id."""

    inbox: str         # list the pending tickets
    show: str          # see one ticket's state and history
    deliver: str       # deliver a recorded decision to its conversation
    decide: str        # an approver approves or rejects it
    approve: str       # another approver approves it
    settle: str        # pay (or close) a decision whose conversation is gone
    approve_less: str  # approve less than was asked, with a reason
    restart: str       # start the process again on the database

    def words(self, ticket_id: str) -> dict[str, str]:
        return {f.name: getattr(self, f.name).replace("{ticket}", ticket_id) for f in fields(self)}


# The actions as the `expenses` command takes them: the CLI's words, and the chat's but where it says more.
COMMANDS = Actions(
    inbox=f"{EXPENSES} inbox",
    show=f"{EXPENSES} show {{ticket}}",
    deliver=f"{EXPENSES} deliver {{ticket}}",
    decide=f"{EXPENSES} approve {{ticket}} --approver NAME (or reject)",
    approve=f"{EXPENSES} approve {{ticket}} --approver NAME",
    settle=f"{EXPENSES} settle {{ticket}} --approver NAME",
    approve_less='--amount 200 --reason "over the per diem"',
    restart="run the command again (and restart any server using it)",
)


class Refusal(Exception):
    """Something refused: `code` for programs, the message (str) for people, and `next_step`: what to do."""

    code: str = "refused"
    next_step: str = ""

    def __init__(self, message: str, *, ticket_id: str = "", next_step: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.message, self.ticket_id = message, ticket_id
        self.next_step = self.next_step if next_step is None else next_step
        self.code = self.code if code is None else code

    def next_for(self, actions: Actions) -> str:
        return self.next_step.format_map(actions.words(self.ticket_id))

    def sentence(self, actions: Actions) -> str:
        return f"{self.message} {self.next_for(actions)}".strip()


class Ticket(Protocol):
    """What a refusal says of a ticket: the ledger's Ticket (ledger/records.py) is one, and refusals sit below it."""

    @property
    def id(self) -> str: ...
    @property
    def status(self) -> TicketStatus: ...
    @property
    def decided_by(self) -> str | None: ...
    @property
    def expires_at(self) -> datetime: ...
    @property
    def delivered_at(self) -> datetime | None: ...
    @property
    def settled_at(self) -> datetime | None: ...
    @property
    def settled_by(self) -> str | None: ...
    @property
    def still_missing(self) -> str | None: ...


class Payout(Protocol):
    """What a refusal says of a payout (the ledger's Payout)."""

    @property
    def id(self) -> str: ...
    @property
    def purpose(self) -> str: ...
    @property
    def amount_text(self) -> str: ...
