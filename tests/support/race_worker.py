"""One process of tests/test_process_races.py: it runs its share of a plan of operations, each at its moment.

Run by the test, never by hand: `python -m support.race_worker TARGET OUT` (tests/ on PYTHONPATH), where TARGET says
in JSON who this process is (its actor) and what it reaches: the ledger's database directly, or, for the actor
"http", the approvals API of a running `make web`. It prints "ready" once it can reach it, reads the plan from stdin
(one JSON line: the start, in seconds since the epoch, and the steps), and runs its actor's steps, each at its
moment. It writes to OUT, one JSON object a line, each decision the ledger accepted (support.invariants.Decision)
and each answer no user should ever get (a 500, a raw database error).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from long_running_agent.ledger import Conversation, Ledger, LedgerError, TicketExpired, TicketStatus
from long_running_agent.ledger.inputs import InputError

from .invariants import APPROVED, FIRST_APPROVAL, Decision

Step = dict[str, Any]


def now() -> datetime:
    return datetime.now(UTC)


def dollars(cents: int | None) -> str | None:
    return None if cents is None else f"{cents // 100}.{cents % 100:02d}"


class Through:
    """Where a worker's operations go; each returns the decisions the ledger accepted, or raises a refusal."""

    async def ready(self) -> None: ...

    async def run(self, step: Step) -> list[tuple[str, str, str]]:
        """(ticket, action, actor) of each decision `step` made."""
        raise NotImplementedError

    async def close(self) -> None: ...


class ThroughLedger(Through):
    def __init__(self, target: dict[str, Any]) -> None:
        self.ledger = Ledger(target["database_url"], approvers=frozenset(target["approvers"]))
        self.actor, self.calls = target["actor"], 0

    async def ready(self) -> None:
        await self.ledger.tickets.count()

    async def run(self, step: Step) -> list[tuple[str, str, str]]:
        ticket_id, who, op = step["ticket"], step.get("who", ""), step["op"]
        tickets = self.ledger.tickets
        try:
            if op == "approve":
                decided = await tickets.decide(ticket_id, approver=who, approve=True, amount=dollars(step["cents"]),
                                               reason="within budget" if step["cents"] else None)
                return [(ticket_id, APPROVED if decided.status is TicketStatus.APPROVED else FIRST_APPROVAL, who)]
            if op == "reject":
                await tickets.decide(ticket_id, approver=who, approve=False, reason="not in the budget")
                return [(ticket_id, "rejected", who)]
            if op == "withdraw":
                await tickets.withdraw(ticket_id, requester=who)
                return [(ticket_id, "withdrawn", who)]
        except TicketExpired:
            return [(ticket_id, "expired", "system")]
        if op == "expire":
            return [(expired, "expired", "system") for expired in await tickets.expire_due()]
        if op == "settle":
            await self.ledger.deliveries.settle(ticket_id, approver=who)
        elif op == "deliver":
            # What the guard and the agent do with a decision: `reimburse` pays an approval, then it is delivered.
            ticket = await tickets.get(ticket_id)
            if ticket.status is TicketStatus.APPROVED:
                await self._pay(ticket.conversation, ticket.purpose, ticket.payable_cents, prefer=[ticket])
            if ticket.status is not TicketStatus.PENDING:
                await self.ledger.deliveries.mark_delivered(ticket_id, actor="approval_guard")
        elif op == "reimburse":
            # The model calls `reimburse` in the ticket's conversation, whatever the ticket's state.
            await self._pay(Conversation(*step["conversation"]), step["purpose"], step["cents"])
        return []

    async def _pay(self, conversation: Conversation, purpose: str, cents: int, prefer: Any = ()) -> None:
        self.calls += 1
        await self.ledger.payouts.pay_approved(conversation=conversation, call_id=f"{self.actor}-{self.calls}",
                                               purpose=purpose, amount_cents=cents, prefer=prefer)

    async def close(self) -> None:
        await self.ledger.close()


class ThroughHttp(Through):
    """The approvals API of `make web`: approve, reject, deliver and settle, as the inbox page calls them."""

    def __init__(self, target: dict[str, Any]) -> None:
        self.http = httpx.AsyncClient(base_url=target["base_url"], timeout=60)
        self.tokens = target["tokens"]

    async def ready(self) -> None:
        (await self.http.get("/health")).raise_for_status()

    async def run(self, step: Step) -> list[tuple[str, str, str]]:
        ticket_id, who, op = step["ticket"], step.get("who", ""), step["op"]
        body = None
        if op == "approve" and step["cents"]:
            body = {"amount": dollars(step["cents"]), "reason": "within budget"}
        elif op == "reject":
            body = {"reason": "not in the budget"}
        answer = await self.http.post(f"/api/approvals/{ticket_id}/{op}", json=body,
                                      headers={"Authorization": f"Bearer {self.tokens[who]}"})
        try:
            said = answer.json()
        except ValueError:
            said = None
        if not isinstance(said, dict) or answer.status_code >= 500:
            raise RuntimeError(f"{op} {ticket_id} by {who}: {answer.status_code} {answer.text[:300]}")
        if answer.status_code >= 400:
            if said.get("error") == TicketExpired.code:
                return [(ticket_id, "expired", "system")]
            raise LedgerError(said.get("message", answer.text))
        if op == "approve":
            waiting = said.get("delivery") == "waiting_for_second_approval"
            return [(ticket_id, FIRST_APPROVAL if waiting else APPROVED, who)]
        return [(ticket_id, "rejected", who)] if op == "reject" else []

    async def close(self) -> None:
        await self.http.aclose()


async def work(target: dict[str, Any], out: Path) -> None:
    through: Through = ThroughHttp(target) if target["actor"] == "http" else ThroughLedger(target)
    lines = []
    try:
        await through.ready()
        print("ready", flush=True)
        plan = json.loads(sys.stdin.readline())
        for step in sorted((s for s in plan["steps"] if s["actor"] == target["actor"]), key=lambda s: s["at"]):
            await asyncio.sleep(max(0.0, plan["start"] + step["at"] - time.time()))
            began = now()
            try:
                made = await through.run(step)
            except (LedgerError, InputError):
                continue  # a refusal: an outcome like any other
            except Exception as error:  # any other answer is a failure the test reports
                lines.append({"error": f"{step}: {type(error).__name__}: {error}"})
                continue
            ended = now()
            for ticket_id, action, who in made:
                cents = step.get("cents") if action in (APPROVED, FIRST_APPROVAL) else None
                decision = Decision(ticket_id, action, who, began, ended, cents)
                lines.append({"decision": asdict(decision) | {"began": began.isoformat(), "ended": ended.isoformat()}})
    finally:
        await through.close()
        out.write_text("".join(json.dumps(line) + "\n" for line in lines))


def read(out: Path) -> tuple[list[Decision], list[str]]:
    """The decisions a worker saw accepted, and the answers no user should get."""
    decisions, errors = [], []
    for line in out.read_text().splitlines():
        entry = json.loads(line)
        if "error" in entry:
            errors.append(entry["error"])
        else:
            fields = entry["decision"]
            decisions.append(Decision(**fields | {k: datetime.fromisoformat(fields[k]) for k in ("began", "ended")}))
    return decisions, errors


if __name__ == "__main__":
    asyncio.run(work(json.loads(sys.argv[1]), Path(sys.argv[2])))
