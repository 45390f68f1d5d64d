"""Benchmark the approval flow against the seed's pattern and ADK's tool confirmation; write the results.

Run with:
    make bench                                 # installs the bench extra, then this
    .venv/bin/python -m benchmarks.run         # full run (its time: benchmarks/results.md)
    .venv/bin/python -m benchmarks.run --quick # small sizes; results not written

Measures, in one run: model calls and request bytes per approved payout and
what a duplicate approval costs, for this project, the seed's pattern and
ADK's own tool confirmation (1); one flow at a time on in-memory, SQLite and
PostgreSQL stores (2); 100 and 1,000 concurrent flows on each durable store
(3); the approver inbox's real read with 1k/10k/100k pending tickets and 100k
decided ones (4); resuming one ticket with 100 vs 100k pending (5); flows per
second with 1 and 2 server replicas on one PostgreSQL database (6);
`python main.py` cold (7); and what the audit trail's hash chain costs per
flow (8). Writes benchmarks/results.md, benchmarks/results.json and
docs/performance.png.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .environment import machine

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Sizes:
    per_flow_repeats: int
    flows_per_repeat: int
    warmup_flows: int
    # (system, store, flows at once, repeats)
    concurrency: list[tuple[str, str, int, int]]
    inbox_sizes: list[int]
    inbox_decided: int
    resume_sizes: list[int]
    inbox_repeats: int
    resume_repeats: int
    demo_repeats: int
    breakdown_flows: int
    replica_flows: int  # per replica and run
    replica_in_flight: int  # per replica
    replica_repeats: int
    chain_flows_per_repeat: int  # per pass, chained and plain each (audit_chain.py)


FULL = Sizes(
    # Three passes of the ours-versus-seed comparison; each ratio's worst pass is what a target is judged on.
    per_flow_repeats=3,
    flows_per_repeat=20,
    warmup_flows=3,
    # A 1,000-flow run takes one to three minutes here, so it runs once, on SQLite (its target); the
    # 100-flow runs repeat, taking turns, for the CPU ratio's passes.
    concurrency=[
        ("ours", "sqlite", 100, 3), ("seed", "sqlite", 100, 3),
        ("ours", "sqlite", 1000, 1), ("seed", "sqlite", 1000, 1),
        ("ours", "postgres", 100, 3), ("seed", "postgres", 100, 3),
        # ADK's runner with no storage to speak of: the framework's own ceiling here.
        ("seed", "memory", 1000, 1),
    ],
    inbox_sizes=[1_000, 10_000, 100_000],
    inbox_decided=100_000,
    resume_sizes=[100, 100_000],
    inbox_repeats=25,
    resume_repeats=5,
    demo_repeats=7,
    breakdown_flows=10,
    # Enough flows per replica run for a steady rate, few enough to keep the run short.
    replica_flows=100,
    replica_in_flight=16,
    replica_repeats=2,
    chain_flows_per_repeat=30,
)

QUICK = Sizes(
    per_flow_repeats=2,
    flows_per_repeat=3,
    warmup_flows=1,
    concurrency=[("ours", "sqlite", 5, 1), ("seed", "sqlite", 5, 1),
                 ("ours", "postgres", 5, 1), ("seed", "postgres", 5, 1), ("seed", "memory", 5, 1)],
    inbox_sizes=[100, 1_000],
    inbox_decided=1_000,
    resume_sizes=[10, 100],
    inbox_repeats=3,
    resume_repeats=2,
    demo_repeats=1,
    breakdown_flows=2,
    replica_flows=6,
    replica_in_flight=3,
    replica_repeats=1,
    chain_flows_per_repeat=3,
)


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of the issue, with what was measured and whether it is met."""
    from .audit_chain import target_rows
    from .inbox import BACKLOG_QUERIES
    from .per_flow import pass_ratios

    cost = results["cost"]
    per_flow = {(r["system"], r["store"]): r for r in results["per_flow"]}
    out: list[dict[str, Any]] = []

    def add(target: str, measured: str, met: bool | str | None) -> None:
        out.append({"target": target, "measured": measured, "met": met})

    ours, seed = cost["ours"], cost["seed"]
    add("Model calls per approved payout <= baseline",
        f"ours {ours['model_calls_per_payout']:.2f}, seed {seed['model_calls_per_payout']:.2f}",
        ours["model_calls_per_payout"] <= seed["model_calls_per_payout"])
    add("Model calls per approved payout <= 4",
        f"ours {ours['model_calls_per_payout']:.2f} (one at a time), "
        f"{ours['several_model_calls_per_payout']:.2f} (two at once)",
        max(ours["model_calls_per_payout"], ours["several_model_calls_per_payout"]) <= 4)
    add("Request bytes per approved payout <= baseline",
        f"ours {ours['request_bytes_per_payout']:,.0f}, seed {seed['request_bytes_per_payout']:,.0f}; "
        f"two at once: ours {ours['several_request_bytes_per_payout']:,.0f}, "
        f"seed {seed['several_request_bytes_per_payout']:,.0f}",
        ours["request_bytes_per_payout"] <= seed["request_bytes_per_payout"]
        and ours["several_request_bytes_per_payout"] <= seed["several_request_bytes_per_payout"])
    add("Two approvals at once: 0 extra payouts",
        f"ours {ours['several_extra_payouts']}, seed {seed['several_extra_payouts']}",
        ours["several_extra_payouts"] == 0)
    add("Duplicate approval: 0 extra model calls, 0 extra payouts",
        f"ours {ours['duplicate_extra_model_calls']} calls / {ours['duplicate_extra_payouts']} payouts; "
        f"seed {seed['duplicate_extra_model_calls']} calls / {seed['duplicate_extra_payouts']} payouts",
        ours["duplicate_extra_model_calls"] == 0 and ours["duplicate_extra_payouts"] == 0)
    memory = per_flow[("ours", "memory")]["flow_s"]
    for store in ("sqlite", "postgres"):
        row = per_flow.get(("ours", store))
        add(f"{'SQLite' if store == 'sqlite' else 'PostgreSQL'} flow <= 2x the in-memory flow",
            f"{row['flow_s'] * 1000:.1f} ms vs {memory * 1000:.1f} ms = {row['x_memory']:.2f}x"
            if row else "PostgreSQL not available",
            row["x_memory"] <= 2 if row else None)
    # The guarantees' price: ours / the seed's pattern, one flow at a time, on the same store, in each pass;
    # judged on the worst pass, so a target holds on every run rather than on a lucky one.
    for store, most in (("postgres", 1.25), ("sqlite", 1.5), ("memory", 2.0)):
        label = {"memory": "in-memory", "sqlite": "SQLite file", "postgres": "PostgreSQL"}[store]
        ratios = pass_ratios(results["per_flow"], store)
        add(f"One flow, ours / seed on the same store <= {most:g}x in every pass ({label})",
            spread(ratios) if ratios else "not measured", max(ratios) <= most if ratios else None)
    by_run = {(r["system"], r["store"], r["flows"]): r for r in results["concurrency"]}
    ours_cpu, seed_cpu = by_run.get(("ours", "postgres", 100)), by_run.get(("seed", "postgres", 100))
    if ours_cpu and seed_cpu:
        ratios = [mine["cpu_ms_per_flow"] / theirs["cpu_ms_per_flow"]
                  for mine, theirs in zip(ours_cpu["runs"], seed_cpu["runs"], strict=True)]
        add("CPU per flow, 100 flows at once on PostgreSQL, <= 1.3x the seed's in every pass",
            f"{ours_cpu['cpu_ms_per_flow']:.1f} ms vs {seed_cpu['cpu_ms_per_flow']:.1f} ms; {spread(ratios)}",
            max(ratios) <= 1.3)
    breakdown = {(r["system"], r["store"]): r for r in results["breakdown"]}
    ours_trips = [r for r in results["breakdown"] if r["system"] == "ours"]
    if ours_trips:
        most_trips = max(r["ledger_round_trips"] for r in ours_trips)
        add("Ledger round trips per approved flow <= 6",
            "; ".join(f"{STORE_NAMES[r['store']]} {r['ledger_round_trips']:.0f} "
                      f"({r['ledger_statements']:.0f} statements)" for r in ours_trips),
            most_trips <= 6)
        calls = [(r, breakdown.get(("seed", r["store"]))) for r in ours_trips]
        add("Session-store calls per approved flow <= the seed's",
            "; ".join(f"{STORE_NAMES[r['store']]} {r['session_store_calls']:.0f} vs "
                      f"{seed['session_store_calls']:.0f}" for r, seed in calls if seed),
            all(r["session_store_calls"] <= seed["session_store_calls"] for r, seed in calls if seed))
    big = by_run.get(("ours", "sqlite", 1000))
    if big:
        add("1,000 concurrent flows on SQLite: 0 errors, 0 double payouts",
            f"{big['errors']} errors, {big['double_payouts']} double payouts",
            big["errors"] == 0 and big["double_payouts"] == 0)
    for store in ("sqlite", "postgres"):
        rows = sorted((r for r in results["inbox"] if r["store"] == store), key=lambda r: r["pending"])
        if rows:
            low, top = rows[0], rows[-1]
            add(f"Inbox read (GET /api/approvals) < 20 ms at {top['pending']:,} pending, "
                f"{top['decided']:,} decided ({store})", f"{top['median_s'] * 1000:.1f} ms", top["median_s"] < 0.020)
            if len(rows) >= 2:
                ratio = top["median_s"] / low["median_s"]
                add(f"Inbox read about flat: at {top['pending']:,} pending <= 1.5x at {low['pending']:,} ({store})",
                    f"{top['median_s'] * 1000:.1f} ms vs {low['median_s'] * 1000:.1f} ms = {ratio:.2f}x",
                    ratio <= 1.5)
            unindexed = sorted({f"{q} at {r['pending']:,}" for r in rows for q in r["unindexed"]})
            add(f"Every inbox query of the backlog reads an index, no sort on the side, at every size ({store})",
                "; ".join(unindexed) if unindexed else f"{len(BACKLOG_QUERIES)} queries, all indexed (EXPLAIN)",
                not unindexed)
        rows = sorted((r for r in results["resume"] if r["store"] == store), key=lambda r: r["pending"])
        if len(rows) >= 2:
            ratio = rows[-1]["median_s"] / rows[0]["median_s"]
            add(f"Resume at {rows[-1]['pending']:,} pending <= 1.5x at {rows[0]['pending']:,} ({store})",
                f"{rows[-1]['median_s'] * 1000:.1f} ms vs {rows[0]['median_s'] * 1000:.1f} ms = {ratio:.2f}x",
                ratio <= 1.5)
    replicas = results.get("replicas") or {}
    if replicas:
        two = replicas["by_replicas"][1]
        add("2 replicas on one PostgreSQL database: 0 errors, 0 double payouts",
            f"{two['errors']} errors, {replicas['double_payouts']} double payouts", two["errors"] == 0
            and replicas["double_payouts"] == 0)
    demo = results["demo"]
    add("python main.py < 2.5 s wall, cold", f"{demo['wall_s']:.2f} s, {demo['peak_rss_mb']:.0f} MB peak RSS",
        demo["wall_s"] < 2.5)
    if "x_seed_first_call" in demo:
        ratios = demo["x_seed_first_call"]
        add("python main.py cold to its first model call <= 1.5x the seed's pattern cold (median of pairs)",
            f"{demo['first_call_s']:.2f} s vs {demo['seed_first_call_s']:.2f} s; {spread(ratios)}",
            statistics.median(ratios) <= 1.5)
    for target, measured, met in target_rows(results.get("audit_chain", [])):
        add(target, measured, met)
    return out


def spread(ratios: list[float]) -> str:
    """A ratio over passes: its median and its range."""
    return f"{statistics.median(ratios):.2f}x (min {min(ratios):.2f}x, max {max(ratios):.2f}x, {len(ratios)} passes)"


STORE_NAMES = {"memory": "in-memory", "sqlite": "SQLite", "postgres": "PostgreSQL"}
# Retired: ADK's DatabaseSessionService alone costs more CPU per flow than 50 flows/s allow on
# 2 cores (results.md, section 3); the per-flow and per-core targets above replace it.
RETIRED = ("1,000 concurrent flows on SQLite: >= 50 flows/s",)


def explain(results: dict[str, Any]) -> list[str]:
    """What bounds the figures behind the harder targets, from this run's own numbers."""
    notes = []
    breakdown = {(r["system"], r["store"]): r for r in results["breakdown"]}
    per_flow = {(r["system"], r["store"]): r for r in results["per_flow"]}
    for store in ("memory", "sqlite", "postgres"):
        ours, seed = breakdown.get(("ours", store)), breakdown.get(("seed", store))
        if ours is None or seed is None:
            continue
        label = {"memory": "in memory", "sqlite": "on SQLite", "postgres": "on PostgreSQL"}[store]
        notes.append(
            f"Where one flow goes {label}: ours {ours['flow_s'] * 1000:.1f} ms = session store "
            f"{ours['session_store_s'] * 1000:.1f} ms ({ours['session_store_calls']:.0f} calls) + ledger "
            f"{ours['ledger_s'] * 1000:.1f} ms ({ours['ledger_round_trips']:.0f} round trips, "
            f"{ours['ledger_statements']:.0f} statements) + runner, guard, tools and model "
            f"{ours['rest_s'] * 1000:.1f} ms; the seed {seed['flow_s'] * 1000:.1f} ms = session store "
            f"{seed['session_store_s'] * 1000:.1f} ms ({seed['session_store_calls']:.0f} calls) + the rest "
            f"{seed['rest_s'] * 1000:.1f} ms."
        )
    ours_sqlite, seed_sqlite = breakdown.get(("ours", "sqlite")), breakdown.get(("seed", "sqlite"))
    seed_flow = per_flow.get(("seed", "sqlite"))
    by_run = {(r["system"], r["store"], r["flows"]): r for r in results["concurrency"]}
    burst = by_run.get(("seed", "sqlite", 1000))
    if ours_sqlite and seed_sqlite and seed_flow:
        budget = 1.5 * seed_flow["flow_s"]
        floor = ours_sqlite["session_store_s"] + seed_sqlite["rest_s"]
        lost = (f" (in this run it lost {burst['errors']:,} of 1,000 concurrent flows to \"database is locked\")"
                if burst and burst["errors"] else "")
        notes.append(
            "SQLite: the seed's pattern keeps its sessions in ADK's SqliteSessionService, which writes through "
            f"aiosqlite connections of its own{lost}; this project keeps them in ADK's DatabaseSessionService, on "
            "the one engine it shares with the ledger, which completed every flow of every burst "
            "(benchmarks/README.md). For the same 11 calls and the same events, DatabaseSessionService took "
            f"{ours_sqlite['session_store_s'] * 1000:.1f} ms of a flow and SqliteSessionService "
            f"{seed_sqlite['session_store_s'] * 1000:.1f} ms. 1.5x the seed's flow is {budget * 1000:.1f} ms; "
            "ADK's DatabaseSessionService plus the seed's own runner and model time "
            f"({seed_sqlite['rest_s'] * 1000:.1f} ms) already make {floor * 1000:.1f} ms, before any ledger, "
            "lock or guard. What would have to change in ADK: a DatabaseSessionService as light as its "
            "SqliteSessionService on SQLite (it runs each call through the ORM, with a state read and a "
            "session update per appended event), or a SqliteSessionService that shares an engine and waits "
            "for the file's lock instead of failing."
        )
    ours_memory, seed_memory = breakdown.get(("ours", "memory")), per_flow.get(("seed", "memory"))
    if ours_memory and seed_memory:
        notes.append(
            "In memory: the seed's pattern writes nothing anywhere, while this project's ledger, even on "
            f"an in-memory SQLite database, took {ours_memory['ledger_s'] * 1000:.1f} ms in "
            f"{ours_memory['ledger_round_trips']:.0f} round trips: each statement goes to aiosqlite's "
            "worker thread and back."
        )
    by = {(r["system"], r["store"], r["flows"]): r for r in results["concurrency"]}
    big, bare = by.get(("ours", "sqlite", 1000)), by.get(("seed", "memory", 1000))
    if big and bare:
        notes.append(
            f"1,000 flows at once on SQLite used {big['cpu_ms_per_flow']:.0f} ms of CPU per flow in one "
            f"process (one event loop; ADK, SQLAlchemy and aiosqlite's threads share one GIL), so one "
            f"process tops out near {1000 / big['cpu_ms_per_flow']:.0f} flows/s and the machine's "
            f"{results['machine']['cores']} cores near "
            f"{results['machine']['cores'] * 1000 / big['cpu_ms_per_flow']:.0f}, however many processes. "
            "ADK's runner "
            f"with no durable storage (seed, in-memory) ran {bare['flows_per_s']:.0f} flows/s at "
            f"{bare['cpu_ms_per_flow']:.0f} ms of CPU per flow."
        )
    notes += _confirmation_notes(results["cost"])
    notes += _inbox_notes(results["inbox"])
    notes += _replica_notes(results.get("replicas") or {}, results["machine"])
    demo = results["demo"]
    note = (f"python main.py: importing main alone took {demo['import_wall_s']:.2f} s of the "
            f"{demo['wall_s']:.2f} s (median; fastest run {demo['fastest_wall_s']:.2f} s)")
    if "adk_import_wall_s" in demo:
        note += (f"; a bare `import google.adk` takes {demo['adk_import_wall_s']:.2f} s (ADK loads its parts "
                 f"lazily), what the seed's pattern imports from ADK {demo['seed_imports_wall_s']:.2f} s. "
                 "The rest of the import is SQLAlchemy (which ADK's DatabaseSessionService needs too) and "
                 "this project's modules; the run itself creates the tables of a new database in one step, "
                 "without Alembic (imported only to upgrade an older schema), and runs two flows")
    notes.append(note + ".")
    return notes


def _confirmation_notes(cost: dict[str, Any]) -> list[str]:
    confirmation, ours = cost.get("confirmation"), cost["ours"]
    if confirmation is None:
        return []
    again = confirmation["duplicate_extra_payouts"] or confirmation["duplicate_extra_model_calls"]
    duplicate = (
        f"ADK ran reimburse {confirmation['duplicate_extra_payouts']} more time(s) and called the model "
        f"{confirmation['duplicate_extra_model_calls']} more time(s)" if again else
        "ADK ran neither reimburse nor the model again and sent no event back: it drops a confirmation "
        "whose original call was already answered after it was first confirmed"
    )
    return [
        f"ADK's tool confirmation: {confirmation['model_calls_per_payout']:.0f} model calls per approved payout "
        f"({confirmation['request_model_calls']} for the request, {confirmation['approval_model_calls']} after the "
        f"confirmation) against {ours['model_calls_per_payout']:.0f} here, and "
        f"{confirmation['request_bytes_per_payout']:,.0f} request bytes against "
        f"{ours['request_bytes_per_payout']:,.0f}: one tool with a short docstring and a shorter instruction, "
        "and no model turn telling the requester that the payment waits (ADK skips that summary; the "
        f"turn ends on its adk_request_confirmation call). The same confirmation sent twice: {duplicate}. "
        "What it does not have: an approver other than whoever holds the conversation, an expiry, an "
        "audit trail, or a payout kept to one by the database.",
    ]


def _inbox_notes(rows: list[dict[str, Any]]) -> list[str]:
    from .inbox import QUERIES

    notes = []
    for store in ("sqlite", "postgres"):
        mine = sorted((r for r in rows if r["store"] == store), key=lambda r: r["pending"])
        if len(mine) < 2:
            continue
        low, top = mine[0], mine[-1]
        grew = {q: top["query_ms"][q] - low["query_ms"][q] for q in QUERIES}
        worst = max(grew, key=lambda q: grew[q])
        why = {
            "pending total": "it sums the few rows of the count the database keeps, whatever the backlog",
            "pending page": "a page is read along the status index from its offset",
        }.get(worst, "see its plan in section 4")
        queries = sum(top["query_ms"].values())
        rows_built = top["shown"]["pending"] + top["shown"]["undelivered"] + top["shown"]["recent_decisions"]
        notes.append(
            f"Inbox on {'SQLite' if store == 'sqlite' else 'PostgreSQL'}: the whole read took "
            f"{top['median_s'] * 1000:.1f} ms at {top['pending']:,} pending against {low['median_s'] * 1000:.1f} ms "
            f"at {low['pending']:,}. The query that grew most is the {worst} ({low['query_ms'][worst]:.2f} -> "
            f"{top['query_ms'][worst]:.2f} ms): {why}. The pages and the latest decisions come out of "
            "indexes in order, the undelivered total out of a partial index of the few undelivered "
            "decisions, the overdue tickets out of an index range that is empty unless some are due. "
            "The pending total sums the count the database keeps in the same transaction as each ticket "
            "write (migration 0007's triggers), instead of counting one index entry per pending ticket. "
            f"The {len(QUERIES)} queries took {queries:.1f} ms of the "
            f"{top['median_s'] * 1000:.1f} ms; the rest is the ORM building {rows_built} tickets, the session "
            "and the connection check-out."
        )
    return notes


def _replica_notes(replicas: dict[str, Any], machine: dict[str, Any]) -> list[str]:
    if not replicas:
        return []
    one, two = replicas["by_replicas"]
    cores = machine["cores"]
    per_flow = two["replica_cpu_ms_per_flow"] + two["postgres_cpu_ms_per_flow"] + two["load_generator_cpu_ms_per_flow"]
    return [
        f"Replicas: {one['flows_per_s']:.1f} flows/s with 1 and {two['flows_per_s']:.1f} with 2 "
        f"({replicas['ratio']:.2f}x). A flow cost {two['replica_cpu_ms_per_flow']:.0f} ms of CPU in the replicas, "
        f"{two['postgres_cpu_ms_per_flow']:.0f} ms in PostgreSQL and {two['load_generator_cpu_ms_per_flow']:.0f} ms "
        f"in the load generator: {per_flow:.0f} ms in all, so {cores} cores cap this machine near "
        f"{cores * 1000 / per_flow:.0f} flows/s. One replica is one Python thread, at most one core "
        f"(it kept {one['replica_busy_cores']:.2f} busy), so it stops near "
        f"{1000 / one['replica_cpu_ms_per_flow']:.0f} flows/s; a second replica can only add what the second "
        f"core has left after PostgreSQL and the load generator (the two kept {two['replica_busy_cores']:.2f} "
        f"cores busy). While the 2-replica runs went, the machine was {two['machine_busy_cores']:.2f} of "
        f"{cores} cores busy, {two['benchmark_busy_cores']:.2f} of them with this benchmark's processes "
        "(replicas, PostgreSQL, load generator): the rest was other work on this shared machine."
    ]


def run(sizes: Sizes, *, with_postgres: bool) -> dict[str, Any]:
    from .audit_chain import measure_audit_chain
    from .breakdown import measure_breakdown
    from .concurrency import measure_concurrency
    from .demo import measure_demo
    from .inbox import measure_inbox
    from .per_flow import measure_per_flow
    from .replicas import measure_replicas
    from .scale import measure_resume
    from .stores import stores

    started = time.perf_counter()
    results: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "config": asdict(sizes),
        "notes": [],
    }
    with stores(with_postgres) as found:
        if found.postgres_error:
            results["notes"].append(f"PostgreSQL figures not measured: {found.postgres_error}")
        step("one flow at a time, model calls, duplicates")
        results["per_flow"], results["cost"] = asyncio.run(measure_per_flow(
            found, repeats=sizes.per_flow_repeats, flows_per_repeat=sizes.flows_per_repeat,
            warmup_flows=sizes.warmup_flows,
        ))
        step("where one flow's time goes")
        results["breakdown"] = asyncio.run(measure_breakdown(
            found, flows=sizes.breakdown_flows, warmup_flows=sizes.warmup_flows,
        ))
        step("what the audit chain costs per flow")
        results["audit_chain"] = asyncio.run(measure_audit_chain(
            found, repeats=sizes.per_flow_repeats, flows_per_repeat=sizes.chain_flows_per_repeat,
            warmup_flows=sizes.warmup_flows,
        ))
        step("concurrent flows (a fresh process per run)")
        results["concurrency"] = measure_concurrency(found, sizes.concurrency)
        step("the inbox's read with a backlog")
        results["inbox"] = asyncio.run(measure_inbox(
            found, sizes=sizes.inbox_sizes, decided=sizes.inbox_decided, repeats=sizes.inbox_repeats,
        ))
        step("resume with a backlog")
        results["resume"] = asyncio.run(measure_resume(
            found, sizes=sizes.resume_sizes, repeats=sizes.resume_repeats,
        ))
        step("throughput with 1 and 2 replicas (PostgreSQL, over HTTP)")
        results["replicas"] = measure_replicas(
            found, flows_per_replica=sizes.replica_flows, in_flight=sizes.replica_in_flight,
            repeats=sizes.replica_repeats, warmup_flows=sizes.warmup_flows,
        )
    step("python main.py, cold")
    results["demo"] = measure_demo(sizes.demo_repeats)
    results["run_seconds"] = time.perf_counter() - started
    results["targets"] = targets(results)
    results["notes"] += explain(results)
    return results


def step(what: str) -> None:
    print(f"[bench] {datetime.now():%H:%M:%S} {what}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark the approval flow against the seed's pattern.")
    parser.add_argument("--quick", action="store_true", help="tiny sizes; print, do not write results")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL figures")
    args = parser.parse_args(argv)
    from .report import chart, markdown, write_json

    results = run(QUICK if args.quick else FULL, with_postgres=not args.no_postgres)
    text = markdown(results)
    if args.quick:
        print(text)
        return 0
    here = Path(__file__).resolve().parent
    write_json(results, here / "results.json")
    (here / "results.md").write_text(text)
    chart(results, ROOT / "docs" / "performance.png")
    print(text)
    print(f"[bench] wrote benchmarks/results.md, benchmarks/results.json, docs/performance.png "
          f"in {results['run_seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
