"""Watch the long-running approval flow end to end: a request, its pending ticket, a decision, the resume.
Run from the project folder (`make demo` makes the .venv; activating it is not needed):
    .venv/bin/python main.py                # request, pending ticket, approval, payout
    .venv/bin/python main.py --reject       # the same, but the approver rejects
    .venv/bin/python main.py --text 'Reimburse $480 for a conference ticket'
Approvers decide real tickets with the `expenses` command: .venv/bin/expenses --help

Exit status: 0 paid (or rejected, with --reject), 1 refused (the last line says why), 2 bad
arguments, 4 the agent asked a question (nothing was requested or paid), 5 a ticket still waits.
"""

import argparse
import secrets
import sys

from google.adk.events import Event
from google.adk.runners import Runner
from google.genai import types

from long_running_agent.agent import build_app  # the package loads .env first
from long_running_agent.cli.entry import run
from long_running_agent.desk import Desk, desk_or_exit
from long_running_agent.ledger import TicketStatus, inputs
from long_running_agent.ledger.storage.engine import database_in_words
from long_running_agent.names import EXPENSES
from long_running_agent.transcript import Transcript, pending_call, pending_calls, tool_response, user_text

DONE, REFUSED, ASKED, PENDING = 0, 1, 4, 5  # how a request ended: the demo's exit status


async def run_demo(desk: Desk, runner: Runner, out: Transcript, requester: str, request: str,
                   approve: bool) -> tuple[int, str]:
    """The request, its decision and the resume; returns the exit status and what happened."""
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id=requester)
    print("\n== 1. The employee asks the agent ==")
    out.say("user", request)
    events = await out.send(runner, requester, session.id, user_text(request))
    call = pending_call(events)
    if call is None:
        return without_approval(events)
    ticket_id = str(tool_response(events, call.id).get("ticket_id"))
    out.say("pending", f"call id={call.id} name={call.name} ticket={ticket_id}")
    print("\n== 2. Later, an approver decides (recorded in the ledger) ==")
    decision = await desk.ledger.tickets.decide(ticket_id, approver="bob", approve=approve,
                                                reason=None if approve else "not a business expense")
    waits = decision.status is TicketStatus.PENDING  # the two-person rule: the first of two approvals
    out.say("approver", f"bob {'approved' if approve else 'rejected'} ticket {decision.id}"
            + (f" ({decision.still_missing})" if waits else ""))
    if waits:
        return PENDING, f"The ticket waits for more approvals; next: {EXPENSES} approve {ticket_id} --approver NAME"
    print("\n== 3. The app sends the updated FunctionResponse: same id and name, role user ==")
    updated = types.FunctionResponse(
        id=call.id,  # the id of the original ask_for_approval call
        name=call.name,  # and its name
        response=decision.as_response(),  # {"status": "approved", "ticket_id": ..., ...}
    )
    # The guard plugin checks it against the ledger and lets it through: it is the ledger's own record.
    out.say("user", f"FunctionResponse(id={updated.id}, name={updated.name}, status={decision.status.value!r})")
    message = types.Content(role="user", parts=[types.Part(function_response=updated)])
    async for event in runner.run_async(user_id=requester, session_id=session.id, new_message=message):
        out.show(event)

    others = [str(tool_response(events, c.id).get("ticket_id")) for c in pending_calls(events) if c.id != call.id]
    if others:  # one message, several expenses: the demo decides the first
        return PENDING, "Still pending: " + "; ".join(f"{EXPENSES} approve {t} --approver NAME" for t in others)
    if len(await desk.ledger.payouts.find(ticket_id=ticket_id)) != (1 if approve else 0):
        return REFUSED, f"Ticket {ticket_id} is {decision.status}, but what was paid does not match: see above."
    return DONE, "The flow completed." if approve else "The flow completed: the request was rejected."


def without_approval(events: list[Event]) -> tuple[int, str]:
    """How a request that opened no ticket ended: paid at once, refused by a tool, or answered in words."""
    said = [r.response or {} for e in events for r in e.get_function_responses()]
    if any(r.get("status") in ("paid", "already_paid") for r in said):
        return DONE, "The flow completed."
    if any(r.get("status") == "error" for r in said):
        return REFUSED, "The request was refused (the agent says why, above): nothing was requested or paid."
    return ASKED, ("Nothing was requested or paid: the agent answered instead (above). Put what it asks for "
                   "in the request, e.g. .venv/bin/python main.py --text 'Reimburse $45 for a taxi'")


async def demo(desk: Desk, args: argparse.Namespace, out: Transcript) -> int:
    config = desk.settings
    amount = inputs.amount(args.amount, most=config.max_amount)  # the amount rule every surface applies
    await desk.prepare()  # the database at this version's schema, or one line saying what to run
    requester = f"demo-{secrets.token_hex(3)}"
    print(f"Model:    {desk.model}\nDatabase: {database_in_words(config.database_url)}")
    print(f"Policy:   {desk.policy.in_words()}")
    print(f"Employee: {requester} (new each run: the daily rules start from zero)")
    async with desk.runner() as runner:  # build_app(desk): the agent and its guard plugin (agent.py)
        status, ended = await run_demo(desk, runner, out, requester,
                                       args.text or f"Please reimburse ${amount:,} for {args.purpose}.",
                                       approve=not args.reject)
        if status == DONE and not args.text:
            print("\n== 4. A small expense is paid at once, with no approval ==")
            session = await runner.session_service.create_session(app_name=runner.app_name, user_id=requester)
            out.say("user", taxi := "Reimburse $42.50 for a taxi to the airport.")
            status, ended = without_approval(await out.send(runner, requester, session.id, user_text(taxi)))
    print(f"\n{ended}")
    return status


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and not argv[0].startswith("-"):  # an approver command: `expenses` runs those now
        print(f"error: the approver commands are the expenses command now: {EXPENSES} {' '.join(argv)}",
              file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--amount", default="250", help="demo amount in dollars (default 250)")
    parser.add_argument("--purpose", default="the team offsite lunch", help="demo purpose")
    parser.add_argument("--text", help="demo request as free text instead of --amount/--purpose")
    parser.add_argument("--reject", action="store_true", help="the simulated approver rejects")
    parser.add_argument("--verbose", action="store_true", help="also print raw ADK events, and ADK's tracebacks")
    args = parser.parse_args(argv)
    desk = desk_or_exit(build_app)  # a setting it cannot use: one line, and exit status 1
    return run(desk, lambda out: demo(desk, args, out), verbose=args.verbose)


if __name__ == "__main__":
    sys.exit(main())
