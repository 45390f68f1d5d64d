"""Decide expense tickets and look after the ledger: see what waits, approve or reject, deliver, settle, audit.

    .venv/bin/expenses inbox
    .venv/bin/expenses approve T-... --approver bob [--amount 200 --reason 'per diem cap']
    .venv/bin/expenses reject T-... --approver bob --reason 'not a business expense'

Exit status: 0 done, 1 refused (the message says why; a setting it cannot use too), 2 bad
arguments, 3 a decision recorded but not delivered yet, 141 what read its output stopped first (`| head`).
"""

# This module: the `expenses` command's arguments, its desk, and one clear line for anything refused
# (commands.py does each command's work, render.py prints it).

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from ..desk import Desk
from ..error_text import without_sql
from ..observability.logs import configure_logging, log_model_failures
from ..paging import DEFAULT_LIMIT, MAX_LIMIT, MAX_OFFSET
from ..refusals import Refusal
from ..refusals.startup import SettingsError
from ..settings import load_settings
from ..transcript import Transcript
from .commands import COMMANDS
from .render import CLI

if TYPE_CHECKING:
    from google.adk.apps import App
    from google.adk.models import BaseLlm


def _whole_number(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high` (ASCII digits: int() alone also takes "٣")."""
    def parse(text: str) -> int:
        digits = text.removeprefix("-")
        if not (digits.isascii() and digits.isdigit() and len(digits) <= 12 and low <= int(text) <= high):
            raise argparse.ArgumentTypeError(f"must be a whole number from {low} to {high:,}, not {text!r}")
        return int(text)
    return parse


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="expenses", description=__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    top.add_argument("--verbose", action="store_true", help="also print raw ADK events, and ADK's tracebacks")
    commands = top.add_subparsers(dest="command", required=True)
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
            deciding.add_argument("--amount", dest="approved_amount",
                                  help="approve less than was asked, e.g. 200 (with --reason)")
    withdrawing = commands.add_parser("withdraw", help="withdraw a pending request (only its requester)")
    withdrawing.add_argument("ticket")
    withdrawing.add_argument("--user", required=True, help="the requester")
    delivering = commands.add_parser("deliver", help="deliver a decided ticket to its conversation (after a crash)")
    delivering.add_argument("ticket")
    settling = commands.add_parser("settle", help="pay (or close) a decided ticket whose conversation is gone")
    settling.add_argument("ticket")
    settling.add_argument("--approver", required=True, help="who settles it")
    showing = commands.add_parser("show", help="a ticket and its history")
    showing.add_argument("ticket")
    evidencing = commands.add_parser("evidence", help="a ticket's evidence as JSON: its request, policy tier, each "
                                     "decision with how it arrived, payouts and whether its audit chain holds")
    evidencing.add_argument("ticket")
    policing = commands.add_parser("policy", help="the approval policy in effect; with --amount, the tier a request "
                                   "would get and who may approve it")
    policing.add_argument("--amount", help="a request's amount in dollars, e.g. 12000")
    policing.add_argument("--requester", help="who asks: what they asked for or were paid today counts too")
    commands.add_parser("migrate", help="bring the database to this version's schema")
    auditing = commands.add_parser("audit", help="check the audit trail's hash chains, or print their heads")
    audit_commands = auditing.add_subparsers(dest="audit_command", required=True, metavar="{verify,head}")
    verifying = audit_commands.add_parser(
        "verify", help="check every ticket's audit chain: exit 0 if all hold, 1 naming the first bad row of each")
    verifying.add_argument("--anchor", metavar="FILE",
                           help="also check that each head in FILE (written by `audit head`) is still in its chain")
    audit_commands.add_parser("head", help="print every chain's head, to keep outside the database "
                                           "(docs/audit-chain.md)")
    return top


def run(desk: Desk, work: Callable[[Transcript], Awaitable[int]], *, verbose: bool = False) -> int:
    """Run `work` on `desk` in a fresh event loop; one clear line for any refusal, never a traceback."""
    out = Transcript(verbose=verbose)
    # A model that cannot be reached is said once, below, as a refusal: ADK's tracebacks only with --verbose.
    log_model_failures("tracebacks" if verbose else "none")

    async def closing() -> int:
        try:
            status = await work(out)
            sys.stdout.flush()  # a reader gone (`| head`) is met here, not in Python's own flush at exit
            return status
        finally:
            await desk.close()

    try:
        return asyncio.run(closing())
    except BrokenPipeError:  # nothing is wrong with the command or the database: stop quietly, as `cat` does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Refusal as refusal:  # the ledger, an input rule, the schema, or the model (refusals/)
        print(f"error: {refusal.sentence(CLI)}", file=sys.stderr)
        return 1
    except Exception as error:  # one line, no traceback (with --verbose, the traceback)
        if verbose:
            raise
        if isinstance(error, (OSError, SQLAlchemyError)):  # the database cannot be reached or used
            where = make_url(desk.settings.database_url).render_as_string(hide_password=True)
            print(f"error: the database {where} cannot be used ({without_sql(f'{type(error).__name__}: {error}')}). "
                  "Check EXPENSES_DATABASE_URL and that its server is running, then run the command again.",
                  file=sys.stderr)
        else:
            print(f"error: {type(error).__name__}: {error}\n(run again with --verbose for details)", file=sys.stderr)
        return 1


def agent_app(desk: Desk, *, model: str | BaseLlm | None = None) -> App:
    """The agent app the commands deliver with, built when a command first delivers."""
    from ..agent import build_app  # here, not at the top: the commands that only read the ledger never load ADK

    return build_app(desk, model=model)


def main(argv: Sequence[str] | None = None) -> int:
    """The `expenses` console script."""
    args = parser().parse_args(argv)
    try:
        desk = Desk(load_settings(), app=agent_app)
        configure_logging(desk.settings.log_format)
        if desk.settings.otlp_endpoint:  # OpenTelemetry's SDK is imported only then: each command starts sooner
            from ..observability.tracing import configure_tracing

            configure_tracing(endpoint=desk.settings.otlp_endpoint, content=desk.settings.trace_content)
    except SettingsError as error:
        print(f"error: {error.sentence(CLI)}", file=sys.stderr)
        return 1

    async def command(out: Transcript) -> int:
        with desk.watch.step(f"expenses {args.command}"):  # the trace of the command's ledger steps and runs
            return await COMMANDS[args.command](desk, args, out)

    return run(desk, command, verbose=args.verbose)
