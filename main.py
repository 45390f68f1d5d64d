"""Watch the long-running approval flow end to end, then act as the approver.

Run with:
    python main.py                      # the demo: request, pending ticket, approval, payout
    python main.py --reject             # the same, but the approver rejects
    python main.py --text "Reimburse $480 for a conference ticket"

The approver CLI (long_running_agent/cli.py; each command is a fresh process):
    python main.py request "Reimburse $250 for the team lunch" --user alice
    python main.py inbox                # pending tickets, 50 a page: --limit 20 --offset 40
    python main.py approve T-... --approver bob
    python main.py approve T-... --approver bob --amount 200 --reason "per diem cap"   # less than asked
    python main.py reject T-... --approver bob --reason "not a business expense"
    python main.py cancel T-... --user alice     # the requester withdraws a pending request
    python main.py show T-...
    python main.py deliver T-...        # deliver a decision whose delivery did not finish
    python main.py settle T-... --approver bob   # its conversation is gone: pay (or close) it
    python main.py migrate              # bring the database to this version's schema
"""

from __future__ import annotations

import argparse
import sys

from google.adk.runners import Runner
from google.genai import types

import long_running_agent  # noqa: F401  (loads .env before the settings are read)
from long_running_agent import cli
from long_running_agent.agent import build_app
from long_running_agent.ledger import Ledger, inputs
from long_running_agent.model.choice import ModelChoice, choose_model
from long_running_agent.services import services, use_app_factory
from long_running_agent.transcript import Transcript, pending_call, tool_response, user_text

REQUESTER = "alice"
APPROVER = "bob"


# --- the demo: the seed flow, top to bottom ----------------------------------


async def run_demo(runner: Runner, ledger: Ledger, out: Transcript, request: str, approve: bool) -> bool:
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id=REQUESTER)

    print("\n== 1. The employee asks; the agent opens an approval ticket ==")
    out.say("user", request)
    events = await out.send(runner, REQUESTER, session.id, user_text(request))
    call = pending_call(events)
    if call is None:
        print("No long-running call: the request did not need approval.")
        return False
    ticket_id = str(tool_response(events, call.id).get("ticket_id"))
    out.say("pending", f"call id={call.id} name={call.name} ticket={ticket_id}")

    print("\n== 2. Later, an approver decides (recorded in the ledger) ==")
    decision = await ledger.tickets.decide(
        ticket_id, approver=APPROVER, approve=approve,
        reason=None if approve else "not a business expense",
    )
    out.say("approver", f"{APPROVER} {decision.status} ticket {decision.id}")

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
    async for event in runner.run_async(user_id=REQUESTER, session_id=session.id, new_message=message):
        out.show(event)

    payouts = await ledger.payouts.find(ticket_id=ticket_id)
    return len(payouts) == (1 if approve else 0)


async def run_small(runner: Runner, ledger: Ledger, out: Transcript, request: str) -> bool:
    print("\n== 4. A small expense is paid at once, with no approval ==")
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id=REQUESTER)
    out.say("user", request)
    events = await out.send(runner, REQUESTER, session.id, user_text(request))
    if pending_call(events):
        # A second demo on the same (UTC) day repeats this expense, so the daily
        # rules send it to an approver, and the agent says why (docs/security.md, "Split purchases").
        return True
    return len(await ledger.payouts.find(session_id=session.id)) == 1


def model_line(choice: ModelChoice) -> str:
    """The demo's first line: which model runs, and why."""
    return f"Model:    {choice.name} ({choice.reason})"


async def demo(args: argparse.Namespace, out: Transcript) -> int:
    config, ledger = services().settings, services().ledger
    # The amount rule every surface applies (ledger/inputs.py): a bad --amount is one line, not a chat.
    amount = inputs.amount(args.amount, most=config.max_amount)
    await cli.ready()
    print(model_line(choose_model(config.model)))
    print(f"Database: {config.database_url}")
    print(f"Policy:   up to ${config.approval_threshold:,} paid at once; more needs an approver")
    request = args.text or f"Please reimburse ${amount:,} for {args.purpose}."
    runner = services().runner()  # build_app()'s app: the agent and its guard plugin (agent.py)
    try:
        ok = await run_demo(runner, ledger, out, request, approve=not args.reject)
        if ok and not args.text:
            ok = await run_small(runner, ledger, out, "Reimburse $42.50 for a taxi to the airport.")
    finally:
        await runner.close()
    print("\nThe flow completed." if ok else "\nThe flow did not complete as expected.")
    return 0 if ok else 1


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
