"""Watch the long-running approval flow end to end, then act as the approver.

Run with:
    python main.py                      # the demo: request, pending ticket, approval, payout
    python main.py --reject             # the same, but the approver rejects
    python main.py --text "Reimburse $480 for a conference ticket"

Approver CLI (each command is a fresh process; the ledger and sessions persist):
    python main.py request "Reimburse $250 for the team lunch" --user alice
    python main.py inbox                # pending tickets, 50 a page: --limit 20 --offset 40
    python main.py approve T-... --approver bob
    python main.py reject T-... --approver bob --reason "not a business expense"
    python main.py show T-...
    python main.py resume T-...         # deliver a decision again if its process died
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from google.adk.events import Event
from google.adk.runners import Runner
from google.genai import types

import long_running_agent  # noqa: F401  (loads .env before settings are read)
from long_running_agent import inputs
from long_running_agent.approvals import Delivery, Outcome, decide_and_deliver, deliver, deliver_due
from long_running_agent.conversations import describe
from long_running_agent.inputs import printable
from long_running_agent.ledger import Ledger, LedgerError, get_ledger
from long_running_agent.model_choice import choose_model
from long_running_agent.paging import DEFAULT_LIMIT, MAX_LIMIT, Page, PagingError, parse_limit, parse_offset
from long_running_agent.policy import from_cents
from long_running_agent.runtime import close_runtime, make_runner
from long_running_agent.settings import Settings, SettingsError, load_settings

REQUESTER = "alice"
APPROVER = "bob"
VERBOSE = False


# --- printing ---------------------------------------------------------------


def say(label: str, text: str) -> None:
    print(f"{label:<9}| {printable(text)}")


def show_event(event: Event) -> None:
    if VERBOSE:
        print(event.model_dump_json(exclude_none=True, indent=1))
    for part in event.content.parts if event.content and event.content.parts else []:
        if part.function_call:
            call = part.function_call
            long_running = call.id in (event.long_running_tool_ids or set())
            say("agent", f"calls {call.name}({_args(call.args)})"
                + ("  [long-running]" if long_running else ""))
        elif part.function_response:
            response = dict(part.function_response.response or {})
            say("tool", f"{part.function_response.name} -> {_args(response)}")
        elif part.text and event.author == "user":
            say("user", part.text)
        elif part.text:
            say("agent", part.text)


def _args(values: dict | None) -> str:
    keep = ("status", "ticket_id", "payout_id", "purpose", "amount", "decided_by", "reason", "error")
    shown = {k: v for k, v in (values or {}).items() if k in keep and v is not None}
    return ", ".join(f"{k}={v!r}" for k, v in shown.items())


async def send(runner: Runner, user_id: str, session_id: str, message: types.Content) -> list[Event]:
    events = []
    async for event in runner.run_async(user_id=user_id, session_id=session_id, new_message=message):
        show_event(event)
        events.append(event)
    return events


def user_text(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def find_pending_call(events: list[Event]) -> types.FunctionCall | None:
    """The long-running call the agent is waiting on, found via long_running_tool_ids."""
    for event in events:
        for call in event.get_function_calls():
            if call.id in (event.long_running_tool_ids or set()):
                return call
    return None


def tool_response(events: list[Event], call_id: str | None) -> dict:
    for event in events:
        for response in event.get_function_responses():
            if response.id == call_id:
                return dict(response.response or {})
    return {}


# --- the demo: the seed flow, top to bottom ----------------------------------


async def run_demo(runner: Runner, ledger: Ledger, request: str, approve: bool) -> bool:
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id=REQUESTER)

    print("\n== 1. The employee asks; the agent opens an approval ticket ==")
    say("user", request)
    events = await send(runner, REQUESTER, session.id, user_text(request))
    call = find_pending_call(events)
    if call is None:
        print("No long-running call: the request did not need approval.")
        return False
    ticket_id = str(tool_response(events, call.id).get("ticket_id"))
    say("pending", f"call id={call.id} name={call.name} ticket={ticket_id}")

    print("\n== 2. Later, an approver decides (recorded in the ledger) ==")
    decision = await ledger.decide(
        ticket_id, approver=APPROVER, approve=approve,
        reason=None if approve else "not a business expense",
    )
    say("approver", f"{APPROVER} {decision.status} ticket {decision.id}")

    print("\n== 3. The app sends the updated FunctionResponse: same id and name, role user ==")
    updated = types.FunctionResponse(
        id=call.id,  # the id of the original ask_for_approval call
        name=call.name,  # and its name
        response=decision.as_response(),  # {"status": "approved", "ticket_id": ..., ...}
    )
    say("user", f"FunctionResponse(id={updated.id}, name={updated.name}, status={decision.status!r})")
    message = types.Content(role="user", parts=[types.Part(function_response=updated)])
    await send(runner, REQUESTER, session.id, message)

    payouts = await ledger.payouts(ticket_id=ticket_id)
    return len(payouts) == (1 if approve else 0)


async def run_small(runner: Runner, ledger: Ledger, request: str) -> bool:
    print("\n== 4. A small expense is paid at once, with no approval ==")
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id=REQUESTER)
    say("user", request)
    events = await send(runner, REQUESTER, session.id, user_text(request))
    if find_pending_call(events):
        # A second demo on the same (UTC) day repeats this expense, so the daily
        # rules send it to an approver, and the agent says why (README, "Split purchases").
        return True
    return len(await ledger.payouts(session_id=session.id)) == 1


async def demo(args: argparse.Namespace) -> int:
    settings = load_settings()
    choice = choose_model()
    print(f"Model:    {choice.name} ({choice.reason})")
    print(f"Database: {settings.database_url}")
    print(f"Policy:   up to ${settings.approval_threshold:,} paid at once; more needs an approver")
    request = args.text or f"Please reimburse ${args.amount:,.2f} for {args.purpose}."
    runner = make_runner(settings.database_url)
    ledger = get_ledger(settings.database_url)
    ok = await run_demo(runner, ledger, request, approve=not args.reject)
    if ok and not args.text:
        ok = await run_small(runner, ledger, "Reimburse $42.50 for a taxi to the airport.")
    print("\nThe flow completed." if ok else "\nThe flow did not complete as expected.")
    return 0 if ok else 1


# --- the approver CLI -----------------------------------------------------------


def _age(created: datetime) -> str:
    minutes = int((datetime.now(UTC) - created).total_seconds() // 60)
    return f"{minutes // 1440}d" if minutes >= 1440 else f"{minutes // 60}h" if minutes >= 60 else f"{minutes}m"


async def catch_up(settings: Settings) -> None:
    """Expire overdue tickets and deliver what is owed, as any approver command does first."""
    for delivery in await deliver_due(
        get_ledger(settings.database_url), app_database_url=settings.database_url, actor="approver CLI"
    ):
        if delivery.delivered:
            print(f"(delivered the {delivery.ticket.status} decision on {delivery.ticket.id} to its conversation)")


async def cmd_request(args: argparse.Namespace) -> int:
    settings = load_settings()
    user = inputs.name(args.user, "user id")
    runner = make_runner(settings.database_url)
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id=user)
    say("user", args.text)
    events = await send(runner, user, session.id, user_text(args.text))
    call = find_pending_call(events)
    if call is None:
        return 0
    ticket_id = tool_response(events, call.id).get("ticket_id")
    if not ticket_id:
        return 1
    print(f"\nTicket {ticket_id} is pending (session {session.id}). An approver runs:\n"
          f"  python main.py approve {ticket_id} --approver NAME")
    return 0


async def cmd_inbox(args: argparse.Namespace) -> int:
    settings = load_settings()
    await catch_up(settings)
    ledger = get_ledger(settings.database_url)
    tickets = await ledger.list_tickets(limit=args.limit, offset=args.offset)
    page = Page(args.offset, args.limit, await ledger.count(), len(tickets))
    more = f" --limit {args.limit}" if args.limit != DEFAULT_LIMIT else ""
    if not page.total:
        print("No pending tickets.")
    elif not tickets:
        last = (page.total - 1) // args.limit * args.limit
        print(f"No pending tickets from offset {args.offset:,}: there are {page.total:,}. "
              f"The last page: python main.py inbox --offset {last}{more}")
    else:
        print(f"Pending: {page.describe()}, oldest first.")
        print(f"{'TICKET':<16} {'REQUESTER':<12} {'AMOUNT':>12}  {'AGE':>4}  PURPOSE")
        for t in tickets:
            print(f"{t.id:<16} {printable(t.user_id):<12} {'$' + format(from_cents(t.amount_cents), ','):>12}  "
                  f"{_age(t.created_at):>4}  {printable(t.purpose)}")
        if page.next_offset is not None:
            print(f"Next page: python main.py inbox --offset {page.next_offset}{more}")
    await show_undelivered(ledger, args.limit)
    return 0


async def show_undelivered(ledger: Ledger, limit: int) -> None:
    """Decisions that have not reached their conversation, oldest first, with why."""
    tickets = await ledger.undelivered(limit=limit)
    if not tickets:
        return
    page = Page(0, limit, await ledger.count_undelivered(), len(tickets))
    print(f"\nDecided, not delivered: {page.describe()}. Deliver one with: python main.py resume TICKET\n"
          "(if its conversation is gone for good: python main.py settle TICKET --approver NAME)")
    print(f"{'TICKET':<16} {'STATUS':<9} {'DECIDED BY':<12} WHY IT HAS NOT ARRIVED")
    for t in tickets:
        why = printable(t.delivery_error or "no attempt finished yet")
        print(f"{t.id:<16} {t.status:<9} {printable(t.decided_by or ''):<12} {why}")


def _paging_arg(parse: Callable[[str], int]) -> Callable[[str], int]:
    def checked(text: str) -> int:
        try:
            return parse(text)
        except PagingError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return checked


def report(delivery: Delivery) -> int:
    """Tell the approver what became of the delivery; the exit status says the same."""
    ticket = delivery.ticket
    for event in delivery.events:
        show_event(event)
    decided = f"Ticket {ticket.id} is {ticket.status}" + (f" by {ticket.decided_by}" if ticket.decided_by else "")
    if delivery.outcome is Outcome.DELIVERED:
        print(f"\n{decided}; the decision reached the conversation ({delivery.where}).")
        return 0
    if delivery.outcome is Outcome.ALREADY_DELIVERED:
        print(f"{decided}, and the decision already reached the conversation; nothing to do.\n"
              f"History: python main.py show {ticket.id}")
        return 0
    if delivery.outcome is Outcome.SETTLED:
        print(f"{decided}, settled by {ticket.settled_by} without its conversation; nothing to do.")
        return 0
    if delivery.outcome is Outcome.STILL_PENDING:
        print(f"error: ticket {ticket.id} is still pending; approve or reject it first.", file=sys.stderr)
        return 1
    fix = {
        Outcome.UNREACHABLE: "It reaches the chat when the requester next writes there. If that can never "
                             f"happen: python main.py settle {ticket.id} --approver NAME",
        Outcome.CONVERSATION_MISSING: "The conversation was deleted. Pay an approved ticket (or close a rejected "
                                      f"one) without it: python main.py settle {ticket.id} --approver NAME",
        Outcome.BUSY: f"Another run is using the conversation; retry: python main.py resume {ticket.id}",
        Outcome.FAILED: f"Fix the cause, then deliver it: python main.py resume {ticket.id}",
    }[delivery.outcome]
    print(f"\n{decided} (recorded in the ledger), but the decision has not reached the conversation:\n"
          f"  why:    {delivery.detail}\n"
          f"  where:  {delivery.where}\n"
          f"  next:   {fix}", file=sys.stderr)
    return 3


async def cmd_decide(args: argparse.Namespace) -> int:
    settings = load_settings()
    await catch_up(settings)
    delivery = await decide_and_deliver(
        get_ledger(settings.database_url), args.ticket, approver=args.approver,
        approve=args.command == "approve", reason=args.reason, app_database_url=settings.database_url,
    )
    status = report(delivery)
    payouts = await get_ledger(settings.database_url).payouts(ticket_id=delivery.ticket.id)
    print(f"Payouts for {delivery.ticket.id}: {len(payouts)}")
    return status


async def cmd_resume(args: argparse.Namespace) -> int:
    """Deliver a recorded decision, e.g. after the process that made it died."""
    settings = load_settings()
    return report(await deliver(
        get_ledger(settings.database_url), args.ticket,
        app_database_url=settings.database_url, actor="approver CLI",
    ))


async def cmd_settle(args: argparse.Namespace) -> int:
    """Finish a decision that cannot reach its conversation: pay an approved ticket, close any other."""
    settings = load_settings()
    ticket, payout = await get_ledger(settings.database_url).settle(args.ticket, approver=args.approver)
    done = f"paid {payout.amount_text} ({payout.id}) without the conversation" if payout else "closed"
    print(f"Ticket {ticket.id} ({ticket.status}) settled by {ticket.settled_by}: {done}.")
    return 0


async def cmd_show(args: argparse.Namespace) -> int:
    settings = load_settings()
    await catch_up(settings)
    ledger = get_ledger(settings.database_url)
    ticket = await ledger.get(args.ticket)
    print(printable(json.dumps(ticket.as_response(), indent=2)))
    print(f"\nConversation: {ticket.user_id} / {ticket.session_id} in {describe(ticket.session_store)}")
    if ticket.status != "pending":
        print("Delivered: " + (f"{ticket.delivered_at:%Y-%m-%d %H:%M:%S}" if ticket.delivered_at
                                else f"not yet ({ticket.delivery_error or 'not attempted'})"))
    print("\nHistory:")
    for entry in await ledger.audit(ticket.id):
        print(f"  {entry.at:%Y-%m-%d %H:%M:%S}  {entry.action:<11} by {printable(entry.actor)}"
              + (f": {printable(entry.detail)}" if entry.detail else ""))
    for payout in await ledger.payouts(ticket_id=ticket.id):
        print(f"\nPaid: {payout.id} {payout.amount_text} at {payout.paid_at:%Y-%m-%d %H:%M:%S}")
    return 0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--amount", type=float, default=250.0, help="demo amount in dollars (default 250)")
    parser.add_argument("--purpose", default="the team offsite lunch", help="demo purpose")
    parser.add_argument("--text", help="demo request as free text instead of --amount/--purpose")
    parser.add_argument("--reject", action="store_true", help="the simulated approver rejects")
    parser.add_argument("--verbose", action="store_true", help="also print raw ADK events")
    commands = parser.add_subparsers(dest="command")
    request = commands.add_parser("request", help="send a request and leave its ticket pending")
    request.add_argument("text")
    request.add_argument("--user", default=REQUESTER, help="who asks (default alice)")
    inbox = commands.add_parser("inbox", help="list pending tickets, and decisions not delivered yet")
    inbox.add_argument("--limit", type=_paging_arg(parse_limit), default=DEFAULT_LIMIT,
                       help=f"tickets per page, 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT})")
    inbox.add_argument("--offset", type=_paging_arg(parse_offset), default=0,
                       help="how many of the oldest pending tickets to skip (default 0)")
    for name in ("approve", "reject"):
        decide = commands.add_parser(name, help=f"{name} a ticket and resume its conversation")
        decide.add_argument("ticket")
        decide.add_argument("--approver", required=True, help="who decides (not the requester)")
        decide.add_argument("--reason", required=name == "reject", help="why (required to reject)")
    redo = commands.add_parser("resume", help="deliver a decided ticket again (after a crash)")
    redo.add_argument("ticket")
    settle = commands.add_parser("settle", help="pay (or close) a decided ticket whose conversation is gone")
    settle.add_argument("ticket")
    settle.add_argument("--approver", required=True, help="who settles it")
    show = commands.add_parser("show", help="a ticket and its history")
    show.add_argument("ticket")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    global VERBOSE
    args = parse_args(sys.argv[1:] if argv is None else argv)
    VERBOSE = args.verbose
    commands = {"request": cmd_request, "inbox": cmd_inbox, "approve": cmd_decide, "reject": cmd_decide,
                "resume": cmd_resume, "settle": cmd_settle, "show": cmd_show}
    command = commands.get(args.command, demo)
    try:
        return asyncio.run(closing(command(args)))
    except (LedgerError, SettingsError, inputs.InputError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except Exception as error:  # a database or model outage: one line, no traceback
        if VERBOSE:
            raise
        print(f"error: {type(error).__name__}: {error}\n(run again with --verbose for details)", file=sys.stderr)
        return 1


async def closing(command: Coroutine[Any, Any, int]) -> int:
    try:
        return await command
    finally:
        await close_runtime()


if __name__ == "__main__":
    sys.exit(main())
