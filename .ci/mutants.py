"""The money defects that once shipped, as mutants: each applied alone to a copy of the project must fail the tests.

Run with: make test-mutations                              (every mutant, SQLite, two at a time)
          make test-mutations ARGS="'no amount pin' --postgres"  (the mutants named; --postgres adds PostgreSQL,
                                                    --every-test runs every test, not up to the first failure)

Each mutant is a few exact edits (file, old, new) made in a temporary copy, never in the working tree. Each `old`
must occur exactly once in its file, so a change to the code cannot quietly turn a mutant into a no-op: the run
stops first, naming the edit to bring up to date. Only the invariant tests run: the state machines of
tests/test_money_invariants.py and tests/test_policy_model.py, the races, and tests/test_process_races.py; a defect
in what they do not cover (the audit trail, the metrics) runs the tests of that rule. A mutant they do not fail is
a gap in them, closed by a stronger invariant, never by a test aimed at the mutant (docs/testing.md: the mutants).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent  # the project: this file lives in .ci/
TESTS = ("tests/test_process_races.py", "tests/test_money_invariants.py", "tests/test_policy_model.py")
TICKETS = "long_running_agent/ledger/tickets.py"
PAYOUTS = "long_running_agent/ledger/payouts.py"
APPROVING = "long_running_agent/ledger/policy/approving.py"
RULES = "long_running_agent/ledger/policy/rules.py"
MIGRATE = "long_running_agent/ledger/storage/migrate.py"
MIGRATIONS = "long_running_agent/ledger/migrations/versions"
A2A_HANDLER = "long_running_agent/a2a/handler.py"
A2A_TESTS = ("tests/test_a2a_tasks.py", "tests/test_a2a_outcomes.py")


class Edit(NamedTuple):
    file: str
    old: str
    new: str


class Mutant(NamedTuple):
    name: str
    edits: tuple[Edit, ...]
    # The tests that must fail: the invariant tests, unless the defect is in what they do not cover (the audit
    # trail, the metrics), where the tests of that rule.
    tests: tuple[str, ...] = TESTS


MUTANTS = [
    Mutant("the amount checked on an earlier read", (
        # The next approver's amount compared with what the others had approved when this transaction read the
        # ticket, not in the UPDATE: an approval committed in between is raised (the overpayment).
        Edit(APPROVING, "PINNED = _CENTS.is_(None) | (func.coalesce(TicketRow.approved_cents, TicketRow.amount_cents)"
                        " >= _CENTS)",
             'PINNED = _CENTS.is_(None) | (bindparam("read_payable", type_=Integer) >= _CENTS)'),
        Edit(TICKETS, '"cents": cents, "lowered": lowered,',
             '"cents": cents, "lowered": lowered, "read_payable": ticket.payable_cents,'),
    )),
    Mutant("no amount pin", (
        Edit(APPROVING, "PINNED = _CENTS.is_(None) | (func.coalesce(TicketRow.approved_cents, TicketRow.amount_cents)"
                        " >= _CENTS)",
             "PINNED = _CENTS.is_(None) | (TicketRow.amount_cents >= _CENTS)"),
    )),
    Mutant("the smaller amount not kept", (
        Edit(APPROVING, 'approved_cents=func.coalesce(bindparam("lowered", type_=Integer), TicketRow.approved_cents))',
             'approved_cents=bindparam("lowered", type_=Integer))'),
    )),
    Mutant("an approval accepted after expiry", (
        Edit(APPROVING, "update(TicketRow).where(*PENDING, BEFORE_EXPIRY, PINNED, _JUDGED)",
             "update(TicketRow).where(*PENDING, PINNED, _JUDGED)"),
    )),
    Mutant("the message group dropped from the totals", (
        Edit("long_running_agent/ledger/policy/request_totals.py",
             'return [REQUESTER] + ([f"message:{message_id}"] if message_id else [])', "return [REQUESTER]"),
    )),
    Mutant("the same approver twice", (
        # An approval judged as if from a newcomer: its approver's earlier approval kept under another key.
        Edit(APPROVING, "{who: rules.eligible(ticket, who) for who in so_far} | {approver: groups}",
             '{f"{who}#{n}": rules.eligible(ticket, who) for n, who in enumerate(so_far)} | {approver: groups}'),
        Edit(APPROVING, 'return {who: placed.get(who, "") for who in now.approvals} | {approver: placed[approver]}',
             "return placed"),
        Edit(APPROVING, "    if approver in now.approvals:\n        raise AlreadyApprovedByYou(now, approver)\n", ""),
    )),
    Mutant("the requester approving their own ticket", (
        Edit(RULES, "if requester_of(ticket.user_id) == approver else groups", "if False else groups"),
    )),
    Mutant("the requester's approval moved onto a group without self-approval", (
        # The approvals given matched again with all their approvers' groups, the requester's too (issue 43: erin's
        # own approval, moved from cfo onto finance, let dave's complete a $25,000 ticket).
        Edit(APPROVING, "{who: rules.eligible(ticket, who) for who in so_far} | {approver: groups}",
             "{who: rules.groups_of(who) for who in so_far} | {approver: groups}"),
    )),
    Mutant("an approver who left the group still holds the place", (
        # The approvals judged as they were stored, not with who is in which group now: bob, out of finance,
        # keeps finance's place and every finance approver after him is refused.
        Edit(APPROVING, "    so_far = now.counted_for\n", "    so_far = ticket.counted_for\n"),
    )),
    Mutant("the pending condition dropped from the decision", (
        Edit(APPROVING, 'PENDING = (TicketRow.id == bindparam("t_id"), TicketRow.status == TicketStatus.PENDING)',
             'PENDING = (TicketRow.id == bindparam("t_id"),)'),
    )),
    Mutant("too few approvals", (
        # The need counted in groups, not approvals: `finance = 2` met by one.
        Edit(APPROVING, "complete = sum(1 for group in placed.values() if group) == ticket.approvals_needed",
             "complete = len({group for group in placed.values() if group}) >= len(ticket.needed)"),
    )),
    Mutant("the wrong group", (
        Edit(RULES, "if group in approvers[who] and index not in tried:",
             "if index not in tried:"),
    )),
    Mutant("an approval after a veto", (
        Edit(APPROVING, "update(TicketRow).where(*PENDING, BEFORE_EXPIRY, PINNED, _JUDGED)",
             'update(TicketRow).where(TicketRow.id == bindparam("t_id"), BEFORE_EXPIRY, PINNED, _JUDGED)'),
    )),
    Mutant("an approval not judged against the approvals before it", (
        Edit(APPROVING, "update(TicketRow).where(*PENDING, BEFORE_EXPIRY, PINNED, _JUDGED)",
             "update(TicketRow).where(*PENDING, BEFORE_EXPIRY, PINNED)"),
    )),
    Mutant("a payout that ignores the approved amount", (
        Edit(PAYOUTS, "cents = ticket.amount_cents if ticket.approved_cents is None else ticket.approved_cents",
             "cents = ticket.amount_cents"),
    )),
    Mutant("a stray reimburse that pays any status", (
        Edit(PAYOUTS, "        TicketRow.status == TicketStatus.APPROVED,\n    )\n    .order_by(TicketRow.created_at)",
             "    )\n    .order_by(TicketRow.created_at)"),
    )),
    Mutant("totals never taken back on rejection or withdrawal", (
        Edit(TICKETS, "if ticket.status not in (TicketStatus.PENDING, TicketStatus.APPROVED):\n"
                      "            await request_totals.take_back(db, row)",
             "if ticket.status is TicketStatus.EXPIRED:\n            await request_totals.take_back(db, row)"),
    )),
    # A new database gets storage/schema.py's tables and storage/migrate.py's copy of the counter's triggers; an
    # upgraded one, the migrations': each mutant below changes both.
    Mutant("no one-payout-per-ticket constraint", (
        Edit("long_running_agent/ledger/storage/schema.py",
             'ticket_id: Mapped[str | None] = mapped_column(ForeignKey("approval_tickets.id"), unique=True)',
             'ticket_id: Mapped[str | None] = mapped_column(ForeignKey("approval_tickets.id"))'),
        Edit(f"{MIGRATIONS}/0002_deliveries_identities_daily_rules.py",
             '        sa.UniqueConstraint("ticket_id", name="uq_approval_payouts_ticket_id"),\n', ""),
    )),
    Mutant("an approval marked delivered that its run never paid", (
        # A delivery run that ended without the payout it was delivering still marked the ticket delivered: neither
        # deliverable nor settleable, and never paid.
        Edit("long_running_agent/ledger/deliveries.py",
             "update(TicketRow).where(*_THESE_UNDELIVERED, _PAID_OR_NOT_APPROVED)",
             "update(TicketRow).where(*_THESE_UNDELIVERED)"),
    )),
    Mutant("the guard reading amounts more leniently than reimburse", (
        # "2e2" let through as $200, which reimburse then refused.
        Edit("long_running_agent/delivery/decisions.py", "return amount(claimed, most=policy.max_amount) == held",
             "return Decimal(str(claimed)) == held"),
    ), tests=("tests/test_paid_or_payable.py",)),
    Mutant("verify compares no payout with its paid row", (
        # A paid ticket's payout edited from $250 to $9,000 passed `expenses audit verify`.
        Edit("long_running_agent/ledger/audit/facts.py",
             "    if payout is not None:\n        found.append(_compared(",
             "    if False:\n        found.append(_compared("),
    ), tests=("tests/test_audit_coverage.py",)),
    Mutant("metrics labelled with whatever method a client sends", (
        Edit("long_running_agent/observability/metrics.py", "self.http.labels(one_of(METHODS, method), route,",
             "self.http.labels(method, route,"),
    ), tests=("tests/test_metrics_access.py",)),
    Mutant("a pending count that ignores expiries", tuple(
        edit for file in (MIGRATE, f"{MIGRATIONS}/0007_pending_count.py") for edit in (
            Edit(file, "_MOVED = \"CASE WHEN NEW.status = 'pending' THEN 1 ELSE -1 END\"",
                 "_MOVED = \"CASE WHEN NEW.status = 'pending' THEN 1 WHEN NEW.status = 'expired' THEN 0 ELSE -1 END\""),
            Edit(file, "(SELECT count(*) FROM added WHERE status = 'pending')",
                 "(SELECT count(*) FROM added WHERE status IN ('pending', 'expired'))"),
        )
    )),
    # What ADK's and a2a-sdk's stock A2A pieces did (docs/a2a.md): the A2A tests must fail on each.
    Mutant("a retried messageId opening a second ticket", (
        Edit(f"{MIGRATIONS}/0014_a2a_tasks.py",
             '        sa.UniqueConstraint("client", "message_id", name="uq_a2a_tasks_client_message_id"),\n', ""),
        Edit("long_running_agent/ledger/storage/schema.py", 'UniqueConstraint("client", "message_id")',
             'Index("ix_a2a_tasks_message", "client", "message_id")'),
    ), tests=A2A_TESTS),
    Mutant("a later message ending the task", (
        Edit(A2A_HANDLER, "_ticket, _payouts, reply = what_the_turn_did(await self._turn(client, record, parts))\n",
             "_ticket, _payouts, reply = what_the_turn_did(await self._turn(client, record, parts))\n"
             "            await self.records.finish(record.id, ticket_id=_ticket, payout_ids=_payouts, reply=reply)\n"),
    ), tests=A2A_TESTS),
    Mutant("a cancel that leaves the ticket pending", (
        Edit(A2A_HANDLER, 'await self.courier.withdraw(record.ticket_id, requester=record.client, channel="a2a")',
             "await self.records.get(record.id, record.client)"),
    ), tests=A2A_TESTS),
    Mutant("a push to whatever URL the client registers", (
        Edit(A2A_HANDLER, 'if refused := refused_url(params.url, self.push_hosts, "A2A_PUSH_HOSTS"):',
             "if refused := None:"),
    ), tests=A2A_TESTS),
    Mutant("another client's task readable", (
        Edit("long_running_agent/a2a/records.py", "row is not None and row.client == client", "row is not None"),
    ), tests=A2A_TESTS),
]


def stale_edits(mutant: Mutant, project: Path = ROOT) -> list[str]:
    """The edits whose `old` text is not in their file exactly once: each would make its mutant a no-op."""
    stale = []
    for edit in mutant.edits:
        found = (project / edit.file).read_text().count(edit.old)
        if found != 1:
            stale.append(f"{mutant.name}: {edit.file} has {found} copies of {edit.old!r}, not 1")
    return stale


def copy_with(mutant: Mutant, directory: Path) -> Path:
    """The project as a clone has it (nothing .gitignore leaves out), with the mutant's edits made."""
    ignored = [line.strip().rstrip("/") for line in (ROOT / ".gitignore").read_text().splitlines()]
    names = [pattern for pattern in ignored if pattern and not pattern.startswith("#") and "/" not in pattern]
    project = directory / "project"
    shutil.copytree(ROOT, project, ignore=shutil.ignore_patterns(".git", *names))
    # Checked again in the copy: the working tree may have changed since the run began.
    stale = stale_edits(mutant, project)
    if stale:
        raise ValueError("\n".join(stale))
    for edit in mutant.edits:
        path = project / edit.file
        path.write_text(path.read_text().replace(edit.old, edit.new))
    return project


class Verdict(NamedTuple):
    mutant: Mutant
    verdict: str  # killed, survived, or error (the tests could not run)
    caught_by: list[str]
    seconds: float
    output: str


def run(mutant: Mutant, *, postgres: bool, every_test: bool) -> Verdict:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mutant-") as directory:
        try:
            project = copy_with(mutant, Path(directory))
        except ValueError as stale:
            return Verdict(mutant, "error", [], 0.0, f"Bring it up to date with the code (.ci/mutants.py):\n{stale}")
        # This virtualenv's Python, run in the copy: the folder it runs in comes first on sys.path, so it and the
        # processes the tests start import the copy's package, not the working tree's that pip installed.
        command = [sys.executable, "-m", "pytest", *mutant.tests, "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                   *([] if postgres else ["-m", "not postgres"])]
        if not every_test:
            command.append("-x")
        # The first failure is enough: no time spent shrinking it to the smallest example.
        env = os.environ | {"INVARIANT_SHRINK": "0"} | ({"TMPDIR": "/dev/shm"} if Path("/dev/shm").is_dir() else {})
        try:
            done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=1800)
        except subprocess.TimeoutExpired:
            return Verdict(mutant, "error", [], time.monotonic() - started, "the tests ran for more than 30 minutes")
    caught_by = re.findall(r"^FAILED (\S+)", done.stdout, re.MULTILINE)
    verdict = {0: "survived", 1: "killed"}.get(done.returncode, "error")
    return Verdict(mutant, verdict, caught_by, time.monotonic() - started, done.stdout[-4000:] + done.stderr[-2000:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="run only these mutants (default: all)")
    parser.add_argument("--postgres", action="store_true", help="the PostgreSQL side of the tests too")
    parser.add_argument("--every-test", action="store_true", help="run every test, not up to the first failure")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    options = parser.parse_args()
    chosen = [m for m in MUTANTS if not options.names or m.name in options.names]
    unknown = set(options.names) - {m.name for m in MUTANTS}
    if unknown:
        print(f"No mutant named {', '.join(sorted(unknown))}; the mutants are:", *(m.name for m in MUTANTS), sep="\n")
        return 2
    stale = [line for mutant in chosen for line in stale_edits(mutant)]
    if stale:
        print("Bring these mutants up to date with the code (.ci/mutants.py):", *stale, sep="\n  ")
        return 2

    started = time.monotonic()
    with ThreadPoolExecutor(options.jobs) as pool:
        verdicts = list(pool.map(lambda m: run(m, postgres=options.postgres, every_test=options.every_test), chosen))
    width = max(len(v.mutant.name) for v in verdicts)
    for v in verdicts:
        if v.verdict == "error":
            print(f"--- {v.mutant.name}: the tests did not run to the end ---\n{v.output}\n")
    print(f"{'mutant':<{width}}  verdict     time  caught by")
    for v in verdicts:
        print(f"{v.mutant.name:<{width}}  {v.verdict:<10} {v.seconds:4.0f}s  {', '.join(v.caught_by)}")
    failed = [v for v in verdicts if v.verdict in ("survived", "error")]
    print(f"{len(verdicts) - len(failed)} of {len(verdicts)} mutants killed "
          f"in {time.monotonic() - started:.0f} s" + (f"; {len(failed)} not" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
