"""Many approval flows at once on one store, in a fresh process.

Run with (the benchmark runs it for you, once per store, size and system):
    .venv/bin/python -m benchmarks.concurrency --system ours --store sqlite --url URL --flows 1000
    .venv/bin/python -m benchmarks.concurrency --system seed --store sqlite --service SqliteSessionService ...

Every flow creates its session, sends the request, has it approved and paid,
all launched together with asyncio.gather on one event loop - what one
server process sees when a thousand approvals land at once. A flow that raises,
or ends without exactly one payout, is an error; a payout beyond the first
for one ticket is a double payout. Prints one JSON line: wall time, completed flows/s,
errors (with the first few messages), double payouts, CPU time per flow and
the process's peak RSS (each run is its own process, so the peak is its own).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from typing import Any

from .baseline import SESSION_SERVICES, SQLITE_SERVICE
from .environment import ROOT, child_env
from .stores import Stores

# (system, store, session service or None for the one this project uses there, flows at once, repeats)
Plan = list[tuple[str, str, str | None, int, int]]


async def run_flows(system_name: str, store: str, url: str | None, flows: int,
                    service: str | None = None) -> dict[str, Any]:
    """Run `flows` concurrent flows on a fresh store; counts, not just timings."""
    from .flows import open_system

    system = open_system(system_name, store, url, service=service)
    try:
        await system.flow(0)  # creates the tables: a running server has them already
        started, cpu_started = time.perf_counter(), time.process_time()
        results = await asyncio.gather(
            *(system.flow(n) for n in range(1, flows + 1)), return_exceptions=True
        )
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        errors: Counter[str] = Counter()
        paid_once = 0
        double = 0
        for result in results:
            if isinstance(result, BaseException):
                errors[f"{type(result).__name__}: {str(result).splitlines()[0][:160]}"] += 1
                continue
            pending, _times = result
            payouts = await system.payouts(pending)
            if payouts == 1:
                paid_once += 1
            else:
                double += max(0, payouts - 1)
                if payouts == 0:
                    errors["flow ended without a payout"] += 1
        return {
            "system": system_name,
            "store": store,
            "service": system.service,
            "flows": flows,
            "wall_s": wall,
            # This process's CPU time (all its threads) while the flows ran.
            "cpu_ms_per_flow": cpu / flows * 1000,
            "flows_per_s": paid_once / wall,
            "completed": paid_once,
            "errors": sum(errors.values()),
            "error_kinds": dict(errors.most_common(3)),
            "double_payouts": double,
            "model_calls": system.meter.total_calls,
        }
    finally:
        await system.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", choices=["ours", "seed"], required=True)
    parser.add_argument("--store", choices=["memory", "sqlite", "postgres"], required=True)
    parser.add_argument("--url", help="the SQLite file or PostgreSQL database (none for memory)")
    parser.add_argument("--service", choices=sorted({*SESSION_SERVICES.values(), SQLITE_SERVICE}),
                        help="the seed's session service (default: the one this project uses on the store)")
    parser.add_argument("--flows", type=int, required=True)
    args = parser.parse_args()
    # Its desk is built from the benchmark's pinned settings (flows.py), whatever this process's environment holds.
    result = asyncio.run(run_flows(args.system, args.store, args.url, args.flows, args.service))
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps(result))


if __name__ == "__main__":
    main()


def measure_concurrency(stores: Stores, plan: Plan) -> list[dict[str, Any]]:
    """Run each (system, store, service, flows, repeats) of `plan` in fresh processes; medians per entry.

    The entries take turns, repeat by repeat (repeat 1 of each, then repeat 2 of those that have
    one, ...), so runs compared with each other ran minutes apart at most. Wall time and flows/s
    are medians over the repeats; errors, double payouts and peak RSS are the worst repeat's.
    """
    entries = [entry for entry in plan if stores.has(entry[1])]
    runs: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(entries))}
    for repeat in range(max((entry[4] for entry in entries), default=0)):
        for i, (system, store, service, flows, repeats) in enumerate(entries):
            if repeat < repeats:
                runs[i].append(_run_child(stores, system, store, service, flows))
    rows = []
    for i, (system, store, _service, flows, repeats) in enumerate(entries):
        worst = max(runs[i], key=lambda r: (r["errors"], r["double_payouts"]))
        rows.append({
            "system": system,
            "store": store,
            "service": runs[i][0]["service"],
            "flows": flows,
            "repeats": repeats,
            "wall_s": statistics.median(r["wall_s"] for r in runs[i]),
            "flows_per_s": statistics.median(r["completed"] / r["wall_s"] for r in runs[i]),
            "errors": worst["errors"],
            "error_kinds": worst["error_kinds"],
            "double_payouts": worst["double_payouts"],
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs[i]),
            "cpu_ms_per_flow": statistics.median(r["cpu_ms_per_flow"] for r in runs[i]),
            "runs": runs[i],
        })
    return rows


def _run_child(stores: Stores, system: str, store: str, service: str | None, flows: int) -> dict[str, Any]:
    url = asyncio.run(stores.fresh(store))
    child = subprocess.run(
        [sys.executable, "-m", "benchmarks.concurrency", "--system", system, "--store", store,
         *(["--url", url] if url else []), *(["--service", service] if service else []), "--flows", str(flows)],
        capture_output=True, text=True, timeout=900, env=child_env(), cwd=ROOT,
    )
    if child.returncode != 0:
        raise RuntimeError(f"concurrency run failed:\n{child.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    return result
