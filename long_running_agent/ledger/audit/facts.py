"""What an audit chain states about the ledger's tables, and the rows of the tables that disagree with it.

A chain that holds (check.py) is the record of what happened; `expenses audit verify` compares the tables with
it (docs/audit-chain.md says which columns that covers, and which it does not):
- a ticket: its columns against the ones its chain states (its "requested" row: chain.STATED); its status against
  the decision in its chain (approved, rejected, expired or withdrawn; pending without one); and, approved, what it
  lets be paid (approved_cents, else amount_cents) against the least that the amount asked and its approvals say;
- a payout: its columns against its "paid" row, in its ticket's chain or, paid without approval, in its own; and the
  amount paid against what its ticket's chain approved;
- a decision: the n-th on a ticket against the n-th "evidence" row of its ticket's chain (evidence.entry).

What a chain states first holds: a ticket is decided once and a payout paid once, so a row added later that states
them otherwise (possible to add after the last anchor, as any row is) does not change what the tables must say.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

from ...names import DECIDED, TicketStatus
from ..inputs import MAX_REASON
from . import chain
from .evidence import entry

AUDIT, TICKETS, PAYOUTS, DECISIONS = "approval_audit", "approval_tickets", "approval_payouts", "approval_decisions"
# The rows that decide a ticket, and the status each leaves it in; before migration 0008 a withdrawal was "cancelled".
_DECIDING = {status.value: status.value for status in DECIDED} | {"cancelled": TicketStatus.WITHDRAWN.value}
_EVIDENCE = ("approver", "approve", "counted_as", "cents", "channel", "principal", "shown")


@dataclass(frozen=True)
class Break:
    """A row that does not hold: the first of a broken chain (an audit row), or a row of another table (`table`, with
    its id `key`) that disagrees with its chain's row `row_id`; `what` says what does not match."""

    ticket_id: str  # the chain's key: its ticket's id, or its payout's for a payout made without approval
    row_id: int | None
    seq: int | None
    what: str
    table: str = AUDIT
    key: str | int | None = None

    def __str__(self) -> str:
        if self.table != AUDIT:
            return f"{self.table} {self.key}: {self.what}"
        where = f"row {self.row_id} (seq {self.seq})" if self.row_id is not None else (
            f"seq {self.seq}" if self.seq is not None else "its trail")
        return f"ticket {self.ticket_id}, {where}: {self.what}"


def of_ticket(ticket: Any, rows: list[Any], payout: Any | None, decisions: list[Any]) -> list[Break]:
    """Where a ticket, its payout and its decisions disagree with the ticket's chain (which holds)."""
    stated = _stated(rows)
    requested = stated.get((TICKETS, ticket.id))
    # The least that the amount asked and the approvals' amounts say: what the chain lets be paid.
    approved = min([requested[1]["amount_cents"] if requested else ticket.amount_cents, *_approved_amounts(rows)])
    found = [_compared(ticket.id, TICKETS, ticket, stated, "no row of its chain states its columns (a request "
                                                           "states them: added by hand)")]
    if requested is not None:  # a ticket its chain does not record is named once, above
        found += [_status(ticket, rows), _payable(ticket, approved)]
    found += _payouts(ticket.id, stated, payout, approved)
    found.append(_decisions(ticket.id, rows, decisions))
    return [broken for broken in found if broken is not None]


def _status(ticket: Any, rows: list[Any]) -> Break | None:
    """The ticket's status against its chain's decision: approved, rejected, expired, withdrawn, or none (pending)."""
    decision = next((row for row in rows if row.action in _DECIDING), None)
    if decision is None:
        return None if ticket.status == TicketStatus.PENDING.value else Break(
            ticket.id, None, None, f"status is {ticket.status}, but its chain holds no decision: pending (edited)",
            TICKETS, ticket.id)
    if ticket.status == _DECIDING[decision.action]:
        return None
    return Break(ticket.id, decision.id, decision.seq, f"status is {ticket.status}, not {_DECIDING[decision.action]} "
                                                       f"as its chain's decision (row {decision.id}, seq "
                                                       f"{decision.seq}) says (edited)", TICKETS, ticket.id)


def _payable(ticket: Any, approved: int) -> Break | None:
    """What an approved ticket lets be paid (approved_cents, else amount_cents) against what its chain approved."""
    column = "amount_cents" if ticket.approved_cents is None else "approved_cents"
    if ticket.status != TicketStatus.APPROVED.value or getattr(ticket, column) <= approved:
        return None
    return Break(ticket.id, None, None, f"{column} is {getattr(ticket, column)}: it lets more be paid than the "
                                        f"{approved} its chain approved (edited)", TICKETS, ticket.id)


def of_payout(payout: Any, rows: list[Any]) -> list[Break]:
    """Where a payout without a ticket in the ledger disagrees with its own chain (which holds)."""
    if payout.ticket_id is not None:
        return [Break(payout.id, None, None, f"its ticket {payout.ticket_id} is not in the ledger (deleted)",
                      PAYOUTS, payout.id)]
    broken = _compared(payout.id, PAYOUTS, payout, _stated(rows), "no audit chain states it (a payout without "
                                                                  "approval gets one as it is paid: added by hand)")
    return [broken] if broken else []


def in_own_chain(payout: Any, broken: Break) -> Break:
    """A payout's own chain's break, named by the payout."""
    where = f"row {broken.row_id} (seq {broken.seq})" if broken.row_id is not None else f"seq {broken.seq}"
    return Break(broken.ticket_id, broken.row_id, broken.seq, f"its own chain, {where}: {broken.what}", PAYOUTS,
                 payout.id)


def _stated(rows: list[Any]) -> dict[tuple[str, Any], tuple[Any, dict[str, Any]]]:
    """What the chain's rows state, by (table, id): the first row stating each table row, and the columns it states."""
    stated: dict[tuple[str, Any], tuple[Any, dict[str, Any]]] = {}
    for row in rows:
        for table, columns in (json.loads(row.facts) if row.facts else {}).items():
            stated.setdefault((table, columns["id"]), (row, columns))
    return stated


def _compared(key: str, table: str, row: Any, stated: dict[tuple[str, Any], tuple[Any, dict[str, Any]]],
              unstated: str) -> Break | None:
    """The columns of `row` that are not what its chain states, or `unstated` if the chain states none."""
    if (table, row.id) not in stated:
        return Break(key, None, None, unstated, table, row.id)
    by, said = stated[table, row.id]
    actual = chain.stated(table, row)
    differ = [column for column in chain.STATED[table] if actual[column] != said.get(column)]
    if not differ:
        return None
    return Break(key, by.id, by.seq, "; ".join(
        f"{column} is {_shown(actual[column])}, not {_shown(said.get(column))}" for column in differ)
        + f" as its {by.action} row (row {by.id}, seq {by.seq}{'' if key == row.id else f' of {key}'}) says (edited)",
        table, row.id)


def _payouts(ticket_id: str, stated: dict[tuple[str, Any], tuple[Any, dict[str, Any]]], payout: Any | None,
             approved: int) -> list[Break | None]:
    """The ticket's payout against its paid row: both there, the same, and no more than the chain approved."""
    paid = {payout_id: said for (table, payout_id), said in stated.items() if table == PAYOUTS}
    found: list[Break | None] = []
    if payout is not None:
        found.append(_compared(ticket_id, PAYOUTS, payout, stated, "no row of its ticket's chain states it (no paid "
                                                                   "row: added by hand, or its ticket_id changed)"))
    for payout_id, (by, said) in paid.items():
        if payout is None or payout.id != payout_id:
            found.append(Break(ticket_id, by.id, by.seq, f"its ticket's {by.action} row (row {by.id}, seq {by.seq} of "
                                                         f"{ticket_id}) states it, and it is not in the ledger with "
                                                         "that ticket (deleted, or its ticket_id changed)", PAYOUTS,
                               payout_id))
        elif said["amount_cents"] > approved:
            found.append(Break(ticket_id, by.id, by.seq, f"its {by.action} row (row {by.id}, seq {by.seq} of "
                                                         f"{ticket_id}) says it paid {said['amount_cents']}, more "
                                                         f"than the {approved} its ticket's chain approved", PAYOUTS,
                               payout_id))
    return found


def _approved_amounts(rows: list[Any]) -> list[int]:
    """The amounts the chain's approvals gave (an approval without one approves the amount asked)."""
    amounts = []
    for row in rows:
        if row.action == "evidence":
            said = _json(row.detail)
            if said.get("approve") and isinstance(said.get("cents"), int):
                amounts.append(said["cents"])
    return amounts


def _decisions(ticket_id: str, rows: list[Any], decisions: list[Any]) -> Break | None:
    """The first decision that is not what the chain's evidence row in its place says (each decision on a ticket
    writes its row and its evidence row in one transaction, under the ticket's lock: their orders are the same)."""
    for decision, row in zip_longest(decisions, [row for row in rows if row.action == "evidence"]):
        if row is None:
            return Break(ticket_id, None, None, "no evidence row of its ticket's chain states it (added by hand)",
                         DECISIONS, decision.id)
        if decision is None:
            return Break(ticket_id, row.id, row.seq, "its decision is not in approval_decisions (deleted)")
        actual = {name: getattr(decision, name) for name in _EVIDENCE} | {"approve": bool(decision.approve)}
        said = _json(row.detail)
        differ = [name for name in _EVIDENCE if actual[name] != said.get(name)]
        if chain.utc(decision.at) != chain.utc(row.at):
            actual["at"], said["at"] = (chain.utc(t).isoformat() for t in (decision.at, row.at))
            differ.append("at")
        if entry(**{name: actual[name] for name in _EVIDENCE})[:MAX_REASON] != row.detail or "at" in differ:
            return Break(ticket_id, row.id, row.seq, "; ".join(
                f"{name} is {_shown(actual[name])}, not {_shown(said.get(name))}" for name in differ or _EVIDENCE)
                + f" as its evidence row (row {row.id}, seq {row.seq} of {ticket_id}) says (edited)",
                DECISIONS, decision.id)
    return None


def _json(text: str | None) -> dict[str, Any]:
    """A row's detail as the JSON it holds; {} for one that holds none (or was cut short at its column's length)."""
    try:
        said = json.loads(text or "")
    except ValueError:
        return {}
    return said if isinstance(said, dict) else {}


def _shown(value: Any) -> str:
    shown = json.dumps(value)
    return shown if len(shown) <= 60 else shown[:57] + "…"
