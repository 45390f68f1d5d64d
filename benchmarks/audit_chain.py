"""What the hash-chained audit trail costs per flow: the app as shipped against the same app with a plain insert.

On each store two systems of this project are open together and take turns flow by flow (per_flow.py's method):
one as shipped, whose audit rows are chained (ledger/audit/chain.py: each row one INSERT ... SELECT of its ticket's head
under the ticket's lock, hashed by the database, and a trigger moving the head), and one whose `chain.write` is, for
its own flows only, the plain INSERT of an unchained trail, on a database without the trigger. The ratio chained /
plain is taken in each pass, and each one's `chain.write` calls are timed: the target is the chain's writes taking
less than 5% of a flow beyond the plain ones, in every pass. Which system goes first alternates.

Run alone with:
    .venv/bin/python -m benchmarks.audit_chain [--quick] [--no-postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import statistics
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import AsyncConnection

from long_running_agent.ledger.audit import chain
from long_running_agent.ledger.audit.check import verify
from long_running_agent.ledger.storage.schema import AuditRow

from .flows import OURS, System, open_system
from .stores import Stores, stores

TARGET_SHARE = 0.05
_PLAIN = insert(AuditRow)
_places = itertools.count(1)  # a place per row, so the plain rows keep the UNIQUE (ticket, seq) of the table


async def _plain_write(
    db: AsyncConnection, ticket_id: str, *, at: datetime, actor: str, action: str, detail: str | None = None,
    facts: Any = None,
) -> None:
    """The trail's writer without the chain: one INSERT of the row, no lock, no hash, no head, no facts."""
    await db.execute(_PLAIN, {"ticket_id": ticket_id, "at": at, "actor": actor, "action": action,
                              "detail": detail[:500] if detail else None, "seq": next(_places), "hash": ""})


class _Writes:
    """A `chain.write` that adds up the time its calls take."""

    def __init__(self, write: Any) -> None:
        self.write, self.seconds = write, 0.0

    async def __call__(self, *args: Any, **kwargs: Any) -> None:
        started = time.perf_counter()
        try:
            await self.write(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - started


@contextlib.contextmanager
def _trail(writes: _Writes) -> Iterator[None]:
    """`chain.write` is `writes` while the block runs: each system's flows use its own writer, timed."""
    shipped = chain.write
    chain.write = writes
    try:
        yield
    finally:
        chain.write = shipped


async def _without_trigger(system: System) -> None:
    assert system.ledger is not None
    await system.ledger.prepare()
    postgresql = system.ledger.database.is_postgresql
    async with system.ledger.engine.begin() as db:
        await db.execute(text("DROP TRIGGER audit_chain_head" + (" ON approval_audit" if postgresql else "")))


async def measure_audit_chain(
    found: Stores, *, repeats: int, flows_per_repeat: int, warmup_flows: int
) -> list[dict[str, Any]]:
    rows, counter = [], 0
    for store in found.kinds:
        chained = open_system(OURS, store, await found.fresh(store))
        plain = open_system(OURS, store, await found.fresh(store))
        try:
            await _without_trigger(plain)
            passes: list[dict[str, float]] = []
            for repeat in range(repeats + 1):
                flows = warmup_flows if repeat == 0 else flows_per_repeat
                writes = {"chained": _Writes(chain.write), "plain": _Writes(_plain_write)}
                took: dict[str, list[float]] = {"chained": [], "plain": []}
                wrote: dict[str, list[float]] = {"chained": [], "plain": []}
                for n in range(flows):
                    counter += 1
                    for which in (("chained", "plain") if n % 2 == 0 else ("plain", "chained")):
                        before = writes[which].seconds
                        with _trail(writes[which]):
                            _pending, times = await (plain if which == "plain" else chained).flow(counter)
                        took[which].append(times.total_s)
                        wrote[which].append(writes[which].seconds - before)
                if repeat:
                    # Medians of flows, not sums: a flow that met a burst of other work counts as one.
                    passes.append({"chained_s": statistics.median(took["chained"]),
                                   "plain_s": statistics.median(took["plain"]),
                                   "extra_write_s": statistics.median(wrote["chained"])
                                   - statistics.median(wrote["plain"])})
            assert chained.ledger is not None and plain.ledger is not None
            verdict = await verify(chained.ledger.database)
            async with plain.ledger.engine.connect() as db:  # none, if the plain flows wrote the plain way
                plain_chained = await db.scalar(text("SELECT count(*) FROM approval_audit WHERE hash <> ''"))
            rows.append({
                "store": store, "repeats": repeats, "flows_per_repeat": flows_per_repeat,
                **{key: statistics.median(p[key] for p in passes) for key in ("chained_s", "plain_s", "extra_write_s")},
                "ratios": [p["chained_s"] / p["plain_s"] for p in passes],
                # What the chain's writes took beyond the plain ones, as a share of the plain flow, pass by pass.
                "shares": [p["extra_write_s"] / p["plain_s"] for p in passes],
                "chains_verified": verdict.chains, "chains_hold": verdict.holds, "plain_rows_chained": plain_chained,
            })
        finally:
            await chained.close()
            await plain.close()
    return rows


STORE_LABELS = {"memory": "in-memory", "sqlite": "SQLite file", "postgres": "PostgreSQL"}


def target_rows(rows: list[dict[str, Any]]) -> list[tuple[str, str, bool]]:
    """(target, measured, met) per store: the chain's writes beyond the plain ones, under 5% of a flow in every pass."""
    return [(f"Audit chain: its cost < {TARGET_SHARE:.0%} of a flow in every pass ({STORE_LABELS[row['store']]})",
             f"{row['extra_write_s'] * 1000:.2f} ms per flow, {_range(row['shares'], '.1%')} of a flow; the whole "
             f"flow chained / plain {_range(row['ratios'], '.3f')}", max(row["shares"]) < TARGET_SHARE)
            for row in rows]


def _range(values: list[float], spec: str) -> str:
    return f"{statistics.median(values):{spec}} ({min(values):{spec}} to {max(values):{spec}})"


def report(rows: list[dict[str, Any]]) -> list[str]:
    """results.md's section on the audit chain's cost."""
    if not rows:
        return []
    lines = ["## 8. What the audit chain costs per flow", "",
             "| Store | Flow ms, chained | Flow ms, plain insert | Chained / plain, per pass "
             "| The chain's writes beyond the plain ones, ms per flow | Share of a flow, per pass | Chains verified |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        lines.append(f"| {STORE_LABELS[row['store']]} | {row['chained_s'] * 1000:.1f} | {row['plain_s'] * 1000:.1f} "
                     f"| {', '.join(f'{r:.3f}' for r in row['ratios'])} | {row['extra_write_s'] * 1000:.2f} "
                     f"| {', '.join(f'{r:.1%}' for r in row['shares'])} "
                     f"| {row['chains_verified']} ({'all hold' if row['chains_hold'] else 'BROKEN'}) |")
    return lines + ["", "The app as shipped and the same app with the audit trail's plain INSERT of before (no lock, "
                        "no hash, no trigger), on databases of their own, taking turns flow by flow: "
                        f"{rows[0]['repeats']} passes of {rows[0]['flows_per_repeat']} flows each. Each flow's audit "
                        "writes are timed (`chain.write`, one call per row); the chain's cost is the median flow's "
                        "writes beyond the plain median's, over the plain flow, pass by pass. The whole flows' ratio "
                        "is beside it: on a shared machine it moves by more than the chain costs "
                        "(benchmarks/audit_chain.py).", ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="What the audit chain costs per flow.")
    parser.add_argument("--quick", action="store_true", help="a few flows: a check that it runs")
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    args = parser.parse_args(argv)
    with stores(not args.no_postgres) as found:
        rows = asyncio.run(measure_audit_chain(found, repeats=2 if args.quick else 3,
                                               flows_per_repeat=3 if args.quick else 30, warmup_flows=2))
    print("\n".join(report(rows)))
    for target, measured, met in target_rows(rows):
        print(f"{'met' if met else 'MISSED'}: {target}: {measured}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
