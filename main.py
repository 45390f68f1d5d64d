"""Watch the long-running approval flow end to end, then act as the approver.

Run from the project folder, with the .venv that `make demo` creates (activated or not):
    .venv/bin/python main.py                # the demo: request, pending ticket, approval, payout
    .venv/bin/python main.py --reject       # the same, but the approver rejects
    .venv/bin/python main.py --text 'Reimburse $480 for a conference ticket'

The approver CLI (long_running_agent/cli.py; each command is a fresh process):
    .venv/bin/python main.py request 'Reimburse $250 for the team lunch' --user alice
    .venv/bin/python main.py inbox          # pending tickets, 50 a page: --limit 20 --offset 40
    .venv/bin/python main.py approve T-... --approver bob
    .venv/bin/python main.py approve T-... --approver bob --amount 200 --reason 'per diem cap'   # less than asked
    .venv/bin/python main.py reject T-... --approver bob --reason 'not a business expense'
    .venv/bin/python main.py cancel T-... --user alice     # the requester withdraws a pending request
    .venv/bin/python main.py show T-...
    .venv/bin/python main.py deliver T-...  # deliver a decision whose delivery did not finish
    .venv/bin/python main.py settle T-... --approver bob   # its conversation is gone: pay (or close) it
    .venv/bin/python main.py migrate        # bring the database to this version's schema

Exit status: 0 done (the demo: paid, or rejected with --reject), 1 refused (the message says
why), 2 bad arguments, 3 a decision recorded but not delivered yet; the demo also 4 (the agent
asked a question; nothing was requested or paid) and 5 (a ticket still waits for an approver).
"""

from __future__ import annotations

import argparse
import secrets
import sys

from google.adk.events import Event
from google.adk.runners import Runner
from google.genai import types

import long_running_agent  # noqa: F401  (loads .env before the settings are read)
from long_running_agent import cli
from long_running_agent.agent import build_app
from long_running_agent.ledger import Ledger, TicketStatus, inputs
from long_running_agent.model.choice import ModelChoice, choose_model
from long_running_agent.names import MAIN_PY
from long_running_agent.services import services, use_app_factory
from long_running_agent.settings import database_in_words
from long_running_agent.transcript import Transcript, pending_call, pending_calls, tool_response, user_text

APPROVER = "bob"
# How a request ended: the demo's exit status (the approver commands' are in cli.py).
DONE, REFUSED, ASKED, PENDING = 0, 1, 4, 5


# --- the demo: the seed flow, top to bottom ----------------------------------


async def run_demo(runner: Runner, ledger: Ledger, out: Transcript, requester: str, request: str,
                   approve: bool) -> tuple[int, str]:
    """The request, its approval and the resume; returns the exit status and what happened."""
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id=requester)

    print("\n== 1. The employee asks; above the limit, the agent opens an approval ticket ==")
    out.say("user", request)
    events = await out.send(runner, requester, session.id, user_text(request))
    call = pending_call(events)
    if call is None:
        return without_approval(events)
    ticket_id = str(tool_response(events, call.id).get("ticket_id"))
    out.say("pending", f"call id={call.id} name={call.name} ticket={ticket_id}")

    print("\n== 2. Later, an approver decides (recorded in the ledger) ==")
    decision = await ledger.tickets.decide(
        ticket_id, approver=APPROVER, approve=approve,
        reason=None if approve else "not a business expense",
    )
    out.say("approver", f"{APPROVER} {'approved' if approve else 'rejected'} ticket {decision.id}")
    if decision.status is TicketStatus.PENDING:  # the two-person rule: this was the first of two approvals
        return PENDING, (f"Ticket {ticket_id} has {decision.approvals_so_far} approvals; a second approver "
                         f"decides it: {MAIN_PY} approve {ticket_id} --approver NAME")

    print("\n== 3. The app sends the updated FunctionResponse: same id and name, role user ==")
    # The ledger, not this message, decides: the response is the ledger's record, and the app's
    # guard plugin answers every approval call with that record and nothing else
    # (`ledger_answer` in approval/guard.py), whatever a message claims.
    updated = types.FunctionResponse(
        id=call.id,  # the id of the original ask_for_approval call
        name=call.name,  # and its name
        response=decision.as_response(),  # {"status": "approved", "ticket_id": ..., ...}
    )
    out.say("user", f"FunctionResponse(id={updated.id}, name={updated.name}, status={decision.status.value!r})")
    message = types.Content(role="user", parts=[types.Part(function_response=updated)])
    async for event in runner.run_async(user_id=requester, session_id=session.id, new_message=message):
        out.show(event)

    others = [str(tool_response(events, c.id).get("ticket_id")) for c in pending_calls(events) if c.id != call.id]
    if others:  # one message, several expenses: the demo decides the first
        return PENDING, "Still pending: " + "; ".join(f"{MAIN_PY} approve {t} --approver NAME" for t in others)
    if len(await ledger.payouts.find(ticket_id=ticket_id)) != (1 if approve else 0):
        return REFUSED, f"Ticket {ticket_id} is {decision.status}, but what was paid does not match: see above."
    return DONE, f"The flow completed: the request was {'approved and paid' if approve else 'rejected'}."


def without_approval(events: list[Event]) -> tuple[int, str]:
    """How a request that opened no ticket ended: paid at once, refused by a tool, or answered in words."""
    said = [r.response or {} for e in events for r in e.get_function_responses()]
    if any(r.get("status") in ("paid", "already_paid") for r in said):
        return DONE, "The flow completed: the request was paid at once, with no approval."
    if any(r.get("status") == "error" for r in said):
        return REFUSED, "The request was refused (the agent says why, above): nothing was requested or paid."
    return ASKED, ("Nothing was requested or paid: the agent answered instead (above). Put what it asks for "
                   f"in the request, e.g. {MAIN_PY} --text 'Reimburse $45 for a taxi'")


async def run_small(runner: Runner, ledger: Ledger, out: Transcript, requester: str, request: str) -> bool:
    print("\n== 4. A small expense is paid at once, with no approval ==")
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id=requester)
    out.say("user", request)
    await out.send(runner, requester, session.id, user_text(request))
    return len(await ledger.payouts.find(session_id=session.id)) == 1


def model_line(choice: ModelChoice) -> str:
    """The demo's first line: which model runs, and why."""
    return f"Model:    {choice.name} ({choice.reason})"


async def demo(args: argparse.Namespace, out: Transcript) -> int:
    config, ledger = services().settings, services().ledger
    # The amount rule every surface applies (ledger/inputs.py): a bad --amount is one line, not a chat.
    amount = inputs.amount(args.amount, most=config.max_amount)
    await cli.ready()
    # A new employee on each run: the daily rules (per requester and UTC day) would send a second run's
    # taxi to an approver; a new requester keeps the rules, and each run the same.
    requester = f"demo-{secrets.token_hex(3)}"
    print(model_line(choose_model(config.model)))
    print(f"Database: {database_in_words(config.database_url)}")
    print(f"Policy:   up to ${config.approval_threshold:,} paid at once (once per purpose, "
          f"${config.daily_auto_approval_limit:,} a day); more needs an approver")
    print(f"Employee: {requester} (new each run: the daily rules start from zero)")
    request = args.text or f"Please reimburse ${amount:,} for {args.purpose}."
    runner = services().runner()  # build_app()'s app: the agent and its guard plugin (agent.py)
    try:
        status, ended = await run_demo(runner, ledger, out, requester, request, approve=not args.reject)
        if status == DONE and not args.text:
            paid = await run_small(runner, ledger, out, requester, "Reimburse $42.50 for a taxi to the airport.")
            status, ended = (DONE, "The flow completed.") if paid else (REFUSED, "The taxi was not paid: see above.")
    finally:
        await runner.close()
    print(f"\n{ended}")
    return status


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--amount", default="250", help="demo amount in dollars (default 250)")
    parser.add_argument("--purpose", default="the team offsite lunch", help="demo purpose")
    parser.add_argument("--text", help="demo request as free text instead of --amount/--purpose")
    parser.add_argument("--reject", action="store_true", help="the simulated approver rejects")
    parser.add_argument("--verbose", action="store_true", help="also print raw ADK events, and ADK's tracebacks")
    cli.add_commands(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    use_app_factory(build_app)  # what the demo and the approver commands run (services.py never imports it)
    return cli.run(args, cli.HANDLERS.get(args.command, demo))


if __name__ == "__main__":
    sys.exit(main())
