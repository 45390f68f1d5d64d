"""What each approver command does, on the desk it is handed (entry.py builds it; render.py prints).

The commands that deliver load the courier, and ADK with it, when they run: those that only read the ledger
(inbox, show, evidence, policy, audit) start without them, unless something is due (delivery/sweep.py).
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from ..delivery.sweep import deliver_due, remind_due
from ..desk import Desk
from ..ledger.audit import check
from ..ledger.inputs import name
from ..names import EXPENSES, REIMBURSE_TOOL
from ..refusals.values import InputError
from ..transcript import Transcript, pending_calls, tool_response, user_text
from . import effective_policy, render


async def catch_up(desk: Desk) -> None:
    """The server's background work, once: expiries, owed deliveries, reminders, and webhooks beside the command."""
    for delivery in await deliver_due(desk, actor="approver CLI"):
        if delivery.delivered:
            print(f"(delivered the {delivery.ticket.status} decision on {delivery.ticket.id} to its conversation)")
    for ticket in await remind_due(desk):
        print(f"(sent the reminder for {ticket.id}, which expires at {ticket.expires_at:%Y-%m-%d %H:%M} UTC)")
    send_notifications(desk)


def send_notifications(desk: Desk) -> None:
    """Send one round of the outbox beside the command; desk.close() waits for it (docs/notifications.md)."""
    if desk.settings.webhook_url is None:
        return
    from ..notifications import send_due

    async def one_round() -> None:
        try:
            failed = [a for a in await send_due(desk.ledger, desk.settings) if not a.sent]
        except Exception as error:
            print(f"(webhook: sending failed ({type(error).__name__}: {error}); the notifications stay in the "
                  "outbox)", file=sys.stderr)
            return
        if failed:
            print(f"(webhook: {len(failed)} notification(s) not sent yet: {failed[-1].error}; they stay in the "
                  "outbox, and make web or the next approver command sends them)", file=sys.stderr)

    desk.in_background(one_round())


async def request(desk: Desk, args: argparse.Namespace, out: Transcript) -> int:
    user = name(args.user, "user id")
    await desk.prepare()
    runner = desk.runner()
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
                  f"  {EXPENSES} approve {ticket_id} --approver NAME")
        return 0
    if not tickets and any(r.name == REIMBURSE_TOOL and (r.response or {}).get("status") in ("paid", "already_paid")
                           for e in events for r in e.get_function_responses()):
        return 0  # small enough to be paid at once
    # Refused (an amount the rules do not allow, a purpose missing): the agent said why, above.
    print("error: no ticket was opened and nothing was paid; write the request as the agent's answer above "
          f"says, e.g. {EXPENSES} request 'Reimburse $250 for the team lunch'", file=sys.stderr)
    return 1


async def inbox(desk: Desk, args: argparse.Namespace, out: Transcript) -> int:
    await catch_up(desk)
    # The same read as GET /api/approvals; the CLI shows no recent decisions (`show` has a ticket's history).
    inbox = await desk.ledger.inbox.read(limit=args.limit, offset=args.offset, undelivered_limit=args.limit, recent=0)
    render.pending(inbox, args.limit, args.offset)
    failed = await desk.ledger.deliveries.failures([t.id for t in inbox.undelivered if t.delivery_error])
    render.undelivered(inbox, args.limit, failed)
    return 0


async def decide(desk: Desk, args: argparse.Namespace, out: Transcript) -> int:
    from ..delivery.courier import Courier

    await catch_up(desk)
    delivery = await Courier(desk).decide(args.ticket, approver=args.approver, approve=args.command == "approve",
                                          reason=args.reason, amount=getattr(args, "approved_amount", None),
                                          channel="cli", principal={"os_user": _os_user(), "approver": args.approver})
    status = render.report(delivery, out)
    payouts = await desk.ledger.payouts.find(ticket_id=delivery.ticket.id)
    print(f"Payouts for {delivery.ticket.id}: {len(payouts)}")
    send_notifications(desk)
    return status


def _os_user() -> str:
    """The account that ran the command: the decision's evidence beside the --approver it named."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (a container's bare uid)
        return "unknown"


async def withdraw(desk: Desk, args: argparse.Namespace, out: Transcript) -> int:
    from ..delivery.courier import Courier

    await catch_up(desk)
    status = render.report(await Courier(desk).withdraw(args.ticket, requester=args.user, channel="cli"), out)
    send_notifications(desk)
    return status


async def deliver_decision(desk: Desk, args: argparse.Namespace, out: Transcript) -> int:
    from ..delivery.courier import Courier

    return render.report(await Courier(desk).deliver(args.ticket, actor="approver CLI"), out)


async def settle(desk: Desk, args: argparse.Namespace, out: Transcript) -> int:
    ticket, payout = await desk.ledger.deliveries.settle(args.ticket, approver=args.approver)
    done = f"paid {payout.amount_text} ({payout.id}) without the conversation" if payout else "closed"
    print(f"Ticket {ticket.id} ({ticket.status}) settled by {ticket.settled_by}: {done}.")
    return 0


async def show(desk: Desk, args: argparse.Namespace, out: Transcript) -> int:
    await catch_up(desk)
    ledger = desk.ledger
    ticket = await ledger.tickets.get(args.ticket)
    failed = (await ledger.deliveries.failures([ticket.id])).get(ticket.id) if not ticket.delivered_at else None
    render.ticket(ticket, failed, await ledger.tickets.audit(ticket.id), await ledger.payouts.find(ticket_id=ticket.id),
                  await ledger.outbox.of_ticket(ticket.id), (await ledger.tickets.requester_days([ticket]))[ticket.id])
    return 0


async def evidence(desk: Desk, args: argparse.Namespace, out: Transcript) -> int:
    render.evidence(await desk.ledger.evidence(args.ticket))
    return 0


async def migrate(desk: Desk, args: argparse.Namespace, out: Transcript) -> int:
    before, after = await desk.prepare()
    if before == after:
        print(f"The database is at schema revision {after}, as this version needs; nothing to do.")
    elif before is None:
        print(f"Created the tables at schema revision {after}: the database was new.")
    else:
        print(f"Upgraded the database from schema revision {before} to {after}.")
    return 0


async def audit(desk: Desk, args: argparse.Namespace, out: Transcript) -> int:
    """`audit verify [--anchor FILE]`: 0 if every chain holds, 1 if one does not; `audit head`: the heads to keep."""
    database = desk.ledger.database
    if args.audit_command == "head":
        render.heads(await check.heads(database), desk.ledger.now())
        return 0
    anchors = []
    if args.anchor is not None:
        try:
            text = Path(args.anchor).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise InputError("anchor", f"{args.anchor} cannot be read ({getattr(error, 'strerror', None) or error}).",
                             next_step="Give the path of a file `expenses audit head` wrote.") from None
        anchors = check.read_anchors(text, args.anchor)
    verdict = await check.verify(database, anchors=anchors)
    render.verdict(verdict, anchored=len(anchors))
    return 0 if verdict.holds else 1


COMMANDS: dict[str, Callable[[Desk, argparse.Namespace, Transcript], Awaitable[int]]] = {
    "request": request, "inbox": inbox, "approve": decide, "reject": decide, "withdraw": withdraw,
    "deliver": deliver_decision, "settle": settle, "show": show, "migrate": migrate, "audit": audit,
    "evidence": evidence, "policy": effective_policy.show,
}
