"""The approver CLI: `.venv/bin/python main.py request|inbox|approve|reject|cancel|deliver|settle|show|migrate`.

Each command is a fresh process; the ledger and the conversations persist, so
a ticket opened in one process (or in `adk web`) is decided in another. Any
approver command first expires overdue tickets and delivers what is owed.

Exit status: 0 done, 1 refused (the message says why), 2 bad arguments,
3 the decision is recorded but has not reached its conversation yet.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any

from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from .approval.conversations import store_in_words
from .approval.courier import (
    Delivery,
    Outcome,
    decide_and_deliver,
    deliver,
    deliver_due,
    remind_due,
    withdraw_and_deliver,
)
from .ledger import Inbox, Ticket, TicketStatus
from .ledger.inputs import name, printable
from .model.failure import log_model_failures
from .names import MAIN_PY, REIMBURSE_TOOL
from .notifications import send_due
from .paging import DEFAULT_LIMIT, MAX_LIMIT, MAX_OFFSET, Page
from .refusals import Actions, Refusal, without_sql
from .services import close_services, services
from .settings import settings
from .transcript import Transcript, pending_calls, tool_response, user_text

COMMANDS = ("request", "inbox", "approve", "reject", "cancel", "deliver", "settle", "show", "migrate")

# The actions a refusal's next step names (refusals.py), as commands to run.
CLI = Actions(
    inbox=f"{MAIN_PY} inbox",
    show=f"{MAIN_PY} show {{ticket}}",
    deliver=f"{MAIN_PY} deliver {{ticket}}",
    decide=f"{MAIN_PY} approve {{ticket}} --approver NAME (or reject)",
    approve=f"{MAIN_PY} approve {{ticket}} --approver NAME",
    settle=f"{MAIN_PY} settle {{ticket}} --approver NAME",
    approve_less='--amount 200 --reason "over the per diem"',
    restart="run the command again (and restart any server using it)",
)


def _age(created: datetime, now: datetime) -> str:
    minutes = int((now - created).total_seconds() // 60)
    return f"{minutes // 1440}d" if minutes >= 1440 else f"{minutes // 60}h" if minutes >= 60 else f"{minutes}m"


# --- the commands -----------------------------------------------------------------


async def catch_up() -> None:
    """The server's background work, once: expiries, owed deliveries, reminders, and webhooks beside the command."""
    for delivery in await deliver_due(actor="approver CLI"):
        if delivery.delivered:
            print(f"(delivered the {delivery.ticket.status} decision on {delivery.ticket.id} to its conversation)")
    for ticket in await remind_due():
        print(f"(sent the reminder for {ticket.id}, which expires at {ticket.expires_at:%Y-%m-%d %H:%M} UTC)")
    send_notifications()


def send_notifications() -> None:
    """Send what the outbox holds (a decision just made, too) while the command goes on.

    The command waits for it only at its end (close_services), and no longer
    than APPROVAL_WEBHOOK_TIMEOUT_SECONDS, whatever the receiver does: one
    round, each attempt under that deadline. What is not sent by then stays
    in the outbox; the command says so only when the receiver failed.
    """
    parts = services()
    if parts.settings.webhook_url is None:
        return

    async def one_round() -> None:
        try:
            failed = [a for a in await send_due(parts.ledger, parts.settings) if not a.sent]
        except Exception as error:
            print(f"(webhook: sending failed ({type(error).__name__}: {error}); the notifications stay in the "
                  "outbox)", file=sys.stderr)
            return
        if failed:
            print(f"(webhook: {len(failed)} notification(s) not sent yet: {failed[-1].error}; they stay in the "
                  "outbox, and make web or the next approver command sends them)", file=sys.stderr)

    parts.in_background(one_round())


async def ready() -> None:
    """The database at this version's schema before the agent runs, or SchemaError in one line.

    Otherwise the ledger is first opened inside the agent's plugin, and ADK
    logs the refusal of a database it cannot use as a traceback.
    """
    await services().prepare()


async def request(args: argparse.Namespace, out: Transcript) -> int:
    user = name(args.user, "user id")
    await ready()
    runner = services().runner()
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id=user)
    out.say("user", args.text)
    try:
        events = await out.send(runner, user, session.id, user_text(args.text))
    finally:
        await runner.close()
    tickets = [tool_response(events, call.id).get("ticket_id") for call in pending_calls(events)]
    if tickets and all(tickets):
        for ticket_id in tickets:
            print(f"\nTicket {ticket_id} is pending (session {session.id}). An approver runs:\n"
                  f"  {MAIN_PY} approve {ticket_id} --approver NAME")
        return 0
    paid = [r for e in events for r in e.get_function_responses()
            if r.name == REIMBURSE_TOOL and (r.response or {}).get("status") in ("paid", "already_paid")]
    if paid and not tickets:
        return 0  # small enough to be paid at once
    # Refused (an amount the rules do not allow, a purpose missing): the agent said why, above.
    print("error: no ticket was opened and nothing was paid; write the request as the agent's answer above "
          f"says, e.g. {MAIN_PY} request 'Reimburse $250 for the team lunch'", file=sys.stderr)
    return 1


async def inbox(args: argparse.Namespace, out: Transcript) -> int:
    await catch_up()
    # The same read as GET /api/approvals; the CLI shows no recent decisions (`show` has a ticket's history).
    inbox = await services().ledger.inbox.read(limit=args.limit, offset=args.offset,
                                               undelivered_limit=args.limit, recent=0)
    tickets = inbox.pending
    page = Page(args.offset, args.limit, inbox.total_pending, len(tickets))
    more = f" --limit {args.limit}" if args.limit != DEFAULT_LIMIT else ""
    if not page.total:
        print("No pending tickets.")
    elif not tickets:
        last = (page.total - 1) // args.limit * args.limit
        print(f"No pending tickets from offset {args.offset:,}: there are {page.total:,}. "
              f"The last page: {MAIN_PY} inbox --offset {last}{more}")
    else:
        print(f"Pending: {page.describe()}, oldest first.")
        print(f"{'TICKET':<16} {'REQUESTER':<12} {'AMOUNT':>12}  {'AGE':>4}  PURPOSE")
        for t in tickets:
            waits = f"  [{t.approvals_so_far} approvals: {t.first_approved_by}]" if t.first_approved_by else ""
            if t.needs_two_approvers and not t.first_approved_by:
                waits += (f"  [needs 2 approvers: {t.combined_text} with the same purpose or message today]"
                          if t.combined_text else "  [needs 2 approvers]")
            print(f"{t.id:<16} {printable(t.user_id):<12} {t.amount_text:>12}  "
                  f"{_age(t.created_at, inbox.now):>4}  {printable(t.purpose)}{waits}")
        if page.next_offset is not None:
            print(f"Next page: {MAIN_PY} inbox --offset {page.next_offset}{more}")
    await show_undelivered(inbox, args.limit)
    return 0


async def show_undelivered(inbox: Inbox, limit: int) -> None:
    """Decisions that have not reached their conversation, oldest first, with when and why the last attempt failed."""
    tickets = inbox.undelivered
    if not tickets:
        return
    failed = await services().ledger.deliveries.failures([t.id for t in tickets if t.delivery_error])
    page = Page(0, limit, inbox.total_undelivered, len(tickets))
    print(f"\nDecided, not delivered: {page.describe()}. Deliver one with: {MAIN_PY} deliver TICKET\n"
          f"(if its conversation is gone for good: {MAIN_PY} settle TICKET --approver NAME)")
    print(f"{'TICKET':<16} {'STATUS':<9} {'DECIDED BY':<12} {'LAST FAILED (UTC)':<17}  WHY IT HAS NOT ARRIVED")
    for t in tickets:
        why = printable(t.delivery_error or "no attempt finished yet")
        when = f"{failed[t.id]:%Y-%m-%d %H:%M}" if t.id in failed else "-"
        print(f"{t.id:<16} {t.status:<9} {printable(t.decided_by or ''):<12} {when:<17}  {why}")


def report(delivery: Delivery, out: Transcript) -> int:
    """Tell the approver what became of the delivery; the exit status says the same."""
    ticket = delivery.ticket
    for event in delivery.events:
        out.show(event)
    approved_by_two = ticket.needs_two_approvers and ticket.status is TicketStatus.APPROVED
    deciders = " and ".join(ticket.approvers) if approved_by_two else ticket.decided_by
    decided = f"Ticket {ticket.id} is {ticket.status}" + (f" by {deciders}" if deciders else "")
    if ticket.status is TicketStatus.CANCELLED:
        decided = f"Ticket {ticket.id} was withdrawn by {ticket.decided_by}"
    if ticket.changed:
        decided += f" for {ticket.payable_text} of the {ticket.amount_text} asked"
    if delivery.outcome is Outcome.DELIVERED:
        where = f" in {delivery.where}" if delivery.where else ""
        print(f"\n{decided}; the decision reached the conversation{where}.")
        return 0
    if delivery.outcome is Outcome.ALREADY_DELIVERED:
        print(f"{decided}, and the decision already reached the conversation; nothing to do.\n"
              f"History: {MAIN_PY} show {ticket.id}")
        return 0
    if delivery.outcome is Outcome.WAITING:
        print(f"Ticket {ticket.id} has {ticket.approvals_so_far} approvals ({ticket.first_approved_by}); a second "
              f"approver decides it: {MAIN_PY} approve {ticket.id} --approver NAME")
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


async def decide(args: argparse.Namespace, out: Transcript) -> int:
    await catch_up()
    delivery = await decide_and_deliver(
        args.ticket, approver=args.approver, approve=args.command == "approve", reason=args.reason,
        amount=getattr(args, "approved_amount", None),
    )
    status = report(delivery, out)
    payouts = await services().ledger.payouts.find(ticket_id=delivery.ticket.id)
    print(f"Payouts for {delivery.ticket.id}: {len(payouts)}")
    send_notifications()
    return status


async def withdraw(args: argparse.Namespace, out: Transcript) -> int:
    """The requester withdraws a pending request; its conversation is told."""
    await catch_up()
    status = report(await withdraw_and_deliver(args.ticket, requester=args.user), out)
    send_notifications()
    return status


async def deliver_decision(args: argparse.Namespace, out: Transcript) -> int:
    """Deliver a recorded decision, e.g. after the process that made it died."""
    return report(await deliver(args.ticket, actor="approver CLI"), out)


async def settle(args: argparse.Namespace, out: Transcript) -> int:
    """Finish a decision that cannot reach its conversation: pay an approved ticket, close any other."""
    ticket, payout = await services().ledger.deliveries.settle(args.ticket, approver=args.approver)
    done = f"paid {payout.amount_text} ({payout.id}) without the conversation" if payout else "closed"
    print(f"Ticket {ticket.id} ({ticket.status}) settled by {ticket.settled_by}: {done}.")
    return 0


async def show(args: argparse.Namespace, out: Transcript) -> int:
    await catch_up()
    ledger = services().ledger
    ticket = await ledger.tickets.get(args.ticket)
    print(printable(json.dumps(ticket.as_record(), indent=2)))
    print(f"\nConversation: {ticket.user_id} / {ticket.session_id} in {store_in_words(ticket.session_store)}")
    if ticket.status is not TicketStatus.PENDING:
        print(f"Delivered: {await delivered(ticket)}")
    print("\nHistory:")
    for entry in await ledger.tickets.audit(ticket.id):
        print(f"  {entry.at:%Y-%m-%d %H:%M:%S}  {entry.action:<11} by {printable(entry.actor)}"
              + (f": {printable(entry.detail)}" if entry.detail else ""))
    for payout in await ledger.payouts.find(ticket_id=ticket.id):
        print(f"\nPaid: {payout.id} {payout.amount_text} at {payout.paid_at:%Y-%m-%d %H:%M:%S}")
    notifications = await ledger.outbox.of_ticket(ticket.id)
    if notifications:
        print("\nNotifications (APPROVAL_WEBHOOK_URL):")
    for n in notifications:
        tried = f", {n.attempts} failed attempt(s), last: {printable(n.last_error)}" if n.last_error else ""
        print(f"  {n.created_at:%Y-%m-%d %H:%M:%S}  {n.event:<22} {n.state}{tried}")
    return 0


async def delivered(ticket: Ticket) -> str:
    """Whether the decision reached its conversation; if not, when and why the last attempt failed."""
    if ticket.delivered_at:
        return f"{ticket.delivered_at:%Y-%m-%d %H:%M:%S}"
    failed = (await services().ledger.deliveries.failures([ticket.id])).get(ticket.id)
    failure = printable(ticket.delivery_error or "")
    if failed and failure:
        failure = f"the last attempt failed at {failed:%Y-%m-%d %H:%M:%S}: {failure}"
    if ticket.settled_at:
        return (f"never; settled by {printable(ticket.settled_by or '')} at {ticket.settled_at:%Y-%m-%d %H:%M:%S} "
                "without the conversation" + (f" ({failure})" if failure else ""))
    return f"not yet ({failure or 'not attempted'})"


async def migrate(args: argparse.Namespace, out: Transcript) -> int:
    """Bring the database to this version's schema (the server does it on start too)."""
    before, after = await services().prepare()
    if before == after:
        print(f"The database is at schema revision {after}, as this version needs; nothing to do.")
    elif before is None:
        print(f"Created the tables at schema revision {after}: the database was new.")
    else:
        print(f"Upgraded the database from schema revision {before} to {after}.")
    return 0


# --- arguments and errors ----------------------------------------------------------


def _whole_number(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high` (ASCII digits: int() alone also takes "٣")."""
    def parse(text: str) -> int:
        digits = text.removeprefix("-")
        if not (digits.isascii() and digits.isdigit() and len(digits) <= 12 and low <= int(text) <= high):
            raise argparse.ArgumentTypeError(f"must be a whole number from {low} to {high:,}, not {text!r}")
        return int(text)
    return parse


def add_commands(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="command")
    asking = commands.add_parser("request", help="send a request and leave its ticket pending")
    asking.add_argument("text")
    asking.add_argument("--user", default="alice", help="who asks (default alice)")
    listing = commands.add_parser("inbox", help="list pending tickets, and decisions not delivered yet")
    listing.add_argument("--limit", type=_whole_number(1, MAX_LIMIT), default=DEFAULT_LIMIT,
                         help=f"tickets per page, 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT})")
    listing.add_argument("--offset", type=_whole_number(0, MAX_OFFSET), default=0,
                         help="how many of the oldest pending tickets to skip (default 0)")
    for verb in ("approve", "reject"):
        deciding = commands.add_parser(verb, help=f"{verb} a ticket and deliver the decision to its conversation")
        deciding.add_argument("ticket")
        deciding.add_argument("--approver", required=True, help="who decides (not the requester)")
        deciding.add_argument("--reason", required=verb == "reject",
                              help="why (required to reject, and to approve less than asked)")
        if verb == "approve":
            # Its own dest: the demo's --amount (main.py) names the request's amount.
            deciding.add_argument("--amount", dest="approved_amount",
                                  help="approve less than was asked, e.g. 200 (with --reason)")
    cancelling = commands.add_parser("cancel", help="withdraw a pending request (only its requester)")
    cancelling.add_argument("ticket")
    cancelling.add_argument("--user", required=True, help="the requester")
    delivering = commands.add_parser("deliver", help="deliver a decided ticket to its conversation (after a crash)")
    delivering.add_argument("ticket")
    settling = commands.add_parser("settle", help="pay (or close) a decided ticket whose conversation is gone")
    settling.add_argument("ticket")
    settling.add_argument("--approver", required=True, help="who settles it")
    showing = commands.add_parser("show", help="a ticket and its history")
    showing.add_argument("ticket")
    commands.add_parser("migrate", help="bring the database to this version's schema")


HANDLERS = {"request": request, "inbox": inbox, "approve": decide, "reject": decide, "cancel": withdraw,
            "deliver": deliver_decision, "settle": settle, "show": show, "migrate": migrate}


def run(args: argparse.Namespace, command: Callable[[argparse.Namespace, Transcript], Coroutine[Any, Any, int]]) -> int:
    """Run one command in a fresh event loop; one clear line for any refusal, never a traceback."""
    out = Transcript(verbose=args.verbose)
    # A model that cannot be reached is said once, below, as a refusal: ADK's tracebacks only with --verbose.
    log_model_failures("tracebacks" if args.verbose else "none")

    async def closing() -> int:
        try:
            return await command(args, out)
        finally:
            await close_services()

    try:
        return asyncio.run(closing())
    except Refusal as refusal:  # the ledger, an input rule, the schema, a setting, or the model (refusals.py)
        print(f"error: {refusal.sentence(CLI)}", file=sys.stderr)
        return 1
    except (OSError, SQLAlchemyError) as error:  # the database cannot be reached or used
        if args.verbose:
            raise
        where = make_url(settings().database_url).render_as_string(hide_password=True)
        print(f"error: the database {where} cannot be used ({without_sql(f'{type(error).__name__}: {error}')}). "
              "Check EXPENSES_DATABASE_URL and that its server is running, then run the command again.",
              file=sys.stderr)
        return 1
    except Exception as error:  # something unforeseen: one line, no traceback
        if args.verbose:
            raise
        print(f"error: {type(error).__name__}: {error}\n(run again with --verbose for details)", file=sys.stderr)
        return 1
