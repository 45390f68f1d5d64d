"""What the approver CLI prints: a delivery's outcome, the inbox's tables, a ticket and its history, the audit check."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..ledger import AuditEntry, Inbox, Notification, Payout, Ticket, TicketStatus
from ..ledger.audit.check import Head, Verdict
from ..ledger.inputs import printable
from ..ledger.need import EVERYONE, counted_words, need_words
from ..ledger.policy.request_totals import RequesterDay, day_in_words
from ..names import EXPENSES, Outcome, store_in_words
from ..paging import DEFAULT_LIMIT, Page
from ..refusals import COMMANDS
from ..transcript import Transcript

if TYPE_CHECKING:
    from ..delivery.courier import Delivery

# The actions a refusal's next step names (refusals/), as commands to run.
CLI = COMMANDS


def pending(inbox: Inbox, limit: int, offset: int) -> None:
    """The page of pending tickets, oldest first, and how to reach the next."""
    tickets = inbox.pending
    page = Page(offset, limit, inbox.total_pending, len(tickets))
    more = f" --limit {limit}" if limit != DEFAULT_LIMIT else ""
    if not page.total:
        print("No pending tickets.")
        return
    if not tickets:
        last = (page.total - 1) // limit * limit
        print(f"No pending tickets from offset {offset:,}: there are {page.total:,}. "
              f"The last page: {EXPENSES} inbox --offset {last}{more}")
        return
    print(f"Pending: {page.describe()}, oldest first.")
    print(f"{'TICKET':<16} {'REQUESTER':<12} {'AMOUNT':>12}  {'AGE':>4}  PURPOSE")
    for t in tickets:
        minutes = int((inbox.now - t.created_at).total_seconds() // 60)
        age = f"{minutes // 1440}d" if minutes >= 1440 else f"{minutes // 60}h" if minutes >= 60 else f"{minutes}m"
        waits = f"  [{words}]" if (words := waiting(t)) else ""
        print(f"{t.id:<16} {printable(t.user_id):<12} {t.amount_text:>12}  "
              f"{age:>4}  {printable(t.purpose)}{waits}")
        if words := _day(t, inbox.days.get(t.id)):
            print(f"{'':<16} {words}")
    if page.next_offset is not None:
        print(f"Next page: {EXPENSES} inbox --offset {page.next_offset}{more}")


def waiting(ticket: Ticket) -> str | None:
    """What a pending ticket still needs, where approvers look: "1 of 2: needs 1 more approver; approved by bob",
    or "needs 2 approvers" before any approval; None when one approval from anyone decides it."""
    if ticket.status is not TicketStatus.PENDING or ticket.needed == ((EVERYONE, 1),):
        return None
    if not ticket.approvals:
        return f"needs {need_words(ticket.needed)}"
    counted = f"; approved by {counted_words(ticket.counted_for)}" if ticket.counted_for else ""
    return f"{ticket.still_missing}{counted}"


def undelivered(inbox: Inbox, limit: int, failed: dict[str, datetime]) -> None:
    """Decisions that have not reached their conversation, oldest first, with when and why the last attempt failed."""
    tickets = inbox.undelivered
    if not tickets:
        return
    page = Page(0, limit, inbox.total_undelivered, len(tickets))
    print(f"\nDecided, not delivered: {page.describe()}. Deliver one with: {EXPENSES} deliver TICKET\n"
          f"(if its conversation is gone for good: {EXPENSES} settle TICKET --approver NAME)")
    print(f"{'TICKET':<16} {'STATUS':<9} {'DECIDED BY':<12} {'LAST FAILED (UTC)':<17}  WHY IT HAS NOT ARRIVED")
    for t in tickets:
        why = printable(t.delivery_error or "no attempt finished yet")
        when = f"{failed[t.id]:%Y-%m-%d %H:%M}" if t.id in failed else "-"
        print(f"{t.id:<16} {t.status:<9} {printable(t.decided_by or ''):<12} {when:<17}  {why}")


def report(delivery: Delivery, out: Transcript) -> int:
    """Tell the approver what became of the delivery; the exit status says the same."""
    ticket = delivery.ticket
    if delivery.events:  # the agent ran on the ledger's record, sent as the pending call's answer (as main.py does)
        out.say("user", f"FunctionResponse(id={ticket.call_id}, name={ticket.call_name}, "
                        f"status={ticket.status.value!r})")
    for event in delivery.events:
        out.show(event)
    approved_by_two = ticket.needs_two_approvers and ticket.status is TicketStatus.APPROVED
    deciders = " and ".join(ticket.approvers) if approved_by_two else ticket.decided_by
    decided = f"Ticket {ticket.id} is {ticket.status}" + (f" by {deciders}" if deciders else "")
    if ticket.status is TicketStatus.WITHDRAWN:
        decided = f"Ticket {ticket.id} was withdrawn by {ticket.decided_by}"
    if ticket.changed:
        decided += f" for {ticket.payable_text} of the {ticket.amount_text} asked"
    if delivery.outcome is Outcome.DELIVERED:
        where = f" in {delivery.where}" if delivery.where else ""
        print(f"\n{decided}; the decision reached the conversation{where}.")
        return 0
    if delivery.outcome is Outcome.ALREADY_DELIVERED:
        print(f"{decided}, and the decision already reached the conversation; nothing to do.\n"
              f"History: {EXPENSES} show {ticket.id}")
        return 0
    if delivery.outcome is Outcome.WAITING:
        print(f"Ticket {ticket.id}: {waiting(ticket)}. The next approver runs: {EXPENSES} approve {ticket.id} "
              "--approver NAME")
        return 0
    if delivery.outcome is Outcome.SETTLED:
        print(f"{decided}, settled by {ticket.settled_by} without its conversation; nothing to do.")
        return 0
    if delivery.outcome is Outcome.STILL_PENDING:
        print(f"error: {delivery.refusal.sentence(CLI)}", file=sys.stderr)
        return 1
    print(f"\n{decided} (recorded in the ledger), but the decision has not reached the conversation:\n"
          f"  why:    {printable(delivery.detail)}\n"
          f"  where:  {delivery.where}\n"
          f"  next:   {delivery.refusal.next_for(CLI)}", file=sys.stderr)
    return 3


def delivered(ticket: Ticket, failed: datetime | None) -> str:
    """Whether the decision reached its conversation; if not, when and why the last attempt failed."""
    if ticket.delivered_at:
        return f"{ticket.delivered_at:%Y-%m-%d %H:%M:%S}"
    failure = printable(ticket.delivery_error or "")
    if failed and failure:
        failure = f"the last attempt failed at {failed:%Y-%m-%d %H:%M:%S}: {failure}"
    if ticket.settled_at:
        return (f"never; settled by {printable(ticket.settled_by or '')} at {ticket.settled_at:%Y-%m-%d %H:%M:%S} "
                "without the conversation" + (f" ({failure})" if failure else ""))
    return f"not yet ({failure or 'not attempted'})"


def _day(ticket: Ticket, day: RequesterDay | None) -> str | None:
    """"alice today: $9,000.00 in all: …", when the requester asked for or was paid anything else that day."""
    words = day_in_words(day.as_json(ticket), printable) if day else None
    return f"{printable(ticket.user_id)} today: {words}" if words else None


def ticket(ticket: Ticket, failed: datetime | None, history: list[AuditEntry], payouts: list[Payout],
           notifications: list[Notification], day: RequesterDay) -> None:
    """A ticket, the requester's day, where its conversation is, whether its decision arrived, its history,
    payouts and webhooks."""
    print(printable(json.dumps(ticket.as_record(), indent=2)))
    if needs := waiting(ticket):
        print(f"\nApprovals: {needs}")
    if words := _day(ticket, day):
        print(f"\n{words}")
    print(f"\nConversation: {ticket.user_id} / {ticket.session_id} in {store_in_words(ticket.session_store)}")
    if ticket.status is not TicketStatus.PENDING:
        print(f"Delivered: {delivered(ticket, failed)}")
    print("\nHistory:")
    for entry in history:
        print(f"  {entry.at:%Y-%m-%d %H:%M:%S}  {entry.action:<11} by {printable(entry.actor)}"
              + (f": {printable(_detail(entry))}" if entry.detail else ""))
    for payout in payouts:
        print(f"\nPaid: {payout.id} {payout.amount_text} at {payout.paid_at:%Y-%m-%d %H:%M:%S}")
    if notifications:
        print("\nNotifications (APPROVAL_WEBHOOK_URL):")
    for n in notifications:
        tried = f", {n.attempts} failed attempt(s), last: {printable(n.last_error)}" if n.last_error else ""
        print(f"  {n.created_at:%Y-%m-%d %H:%M:%S}  {n.event:<22} {n.state}{tried}")


def _detail(entry: AuditEntry) -> str:
    """An entry's detail; a decision's evidence (kept as JSON, for the chain) as its channel."""
    if entry.action != "evidence" or not entry.detail:
        return entry.detail or ""
    try:
        return f"through {json.loads(entry.detail)['channel']} ({EXPENSES} evidence has the rest)"
    except (ValueError, KeyError, TypeError):
        return entry.detail


def evidence(document: dict[str, object]) -> None:
    """A ticket's evidence (Ledger.evidence), as the API answers it: JSON, what users wrote kept printable."""
    print(printable(json.dumps(document, indent=2)))


def heads(found: list[Head], now: datetime) -> None:
    """Every audit chain's head, one `TICKET SEQ HASH` a line: the file `audit verify --anchor` reads back."""
    print(f"# {EXPENSES} audit head: {len(found):,} chain(s) at {now.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}")
    for head in found:
        print(printable(str(head)))


def verdict(found: Verdict, anchored: int) -> None:
    """Each broken chain's first bad row, one line each (stderr), then what was checked."""
    for broken in found.breaks:
        print(f"broken: {printable(str(broken))}", file=sys.stderr)
    print(str(found) + (f" {anchored:,} anchored head(s) checked." if anchored else ""))

