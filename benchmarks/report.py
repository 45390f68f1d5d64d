"""Turning the measurements into benchmarks/results.md and results.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import audit_chain

STORE_LABELS = {"memory": "in-memory", "sqlite": "SQLite file", "postgres": "PostgreSQL"}
SYSTEMS = ("ours", "seed", "confirmation")


def write_json(results: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(results, indent=2) + "\n")


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def _mark(met: bool | str | None) -> str:
    return {True: "met", False: "**missed**", None: "not measured", "reported": "reported"}[met]


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
        "# Benchmark results",
        "",
        f"Measured {results['date']} on {m['cores']} cores ({m['cpu']}), {m['memory_gb']} GB, "
        f"{m['os']}; Python {m['python']}, google-adk {m['google_adk']}, SQLAlchemy {m['sqlalchemy']}, "
        f"SQLite {m['sqlite']}, PostgreSQL {m['postgresql']}. Model: the offline model "
        "(`offline-expense-model`), so only framework and storage costs are measured. "
        "Each figure is a median over repeated runs (repeats in brackets); ratios compare "
        f"figures from this one run. Whole run: {results['run_seconds']:.0f} s.",
        "",
        "`ours` is this project as shipped (the App with its ApprovalGuard, sessions in "
        "DatabaseSessionService, the ledger beside them, on one engine); `seed` is the seed's pattern: a plain "
        "LongRunningFunctionTool agent on the same model, tools that just answer pending/paid, "
        "no ledger, no guard, on the session service this project uses on the same store "
        "(InMemorySessionService in memory, DatabaseSessionService on a SQLite file and on PostgreSQL), "
        "and, for information, on ADK's SqliteSessionService on a SQLite file; `confirmation` is ADK's own "
        "tool confirmation: one tool, `FunctionTool(reimburse, "
        "require_confirmation=<amount above the limit>)`, approved by answering ADK's "
        "`adk_request_confirmation` call with `{\"confirmed\": true}`. Our in-memory configuration is "
        "InMemorySessionService with the ledger on an in-memory SQLite database "
        "(`sqlite+aiosqlite://`). Every process runs on the benchmark's own settings (the app's "
        "defaults, the offline model), whatever `.env` holds.",
        "",
        "## Targets",
        "",
        "| Target | Measured | Result |",
        "| --- | --- | --- |",
    ]
    for target in results["targets"]:
        lines.append(f"| {target['target']} | {target['measured']} | {_mark(target['met'])} |")
    from .run import RETIRED

    lines += ["", "For information, not targets:", "", *[f"- {line}" for line in results["information"]],
              "", "Retired targets:", "", *[f"- {target}: {why}." for target, why in RETIRED]]

    cost = results["cost"]
    lines += [
        "",
        "## 1. Model calls and request bytes",
        "",
        "| System | Model calls per approved payout | of which: request + approval "
        "| Request bytes per approved payout | Duplicate approval: extra model calls "
        "| Duplicate approval: extra payouts | Duplicate approval: events back (with text) "
        "| Two at once: model calls per payout | Two at once: request bytes per payout "
        "| Two at once: extra payouts |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for system in SYSTEMS:
        c = cost.get(system)
        if c is None:
            continue
        lines.append(
            f"| {system} | {c['model_calls_per_payout']:.2f} "
            f"| {c['request_model_calls']} + {c['approval_model_calls']} "
            f"| {c['request_bytes_per_payout']:,.0f} "
            f"| {c['duplicate_extra_model_calls']} | {c['duplicate_extra_payouts']} "
            f"| {c['duplicate_events']} ({c['duplicate_replies']}) "
            f"| {c['several_model_calls_per_payout']:.2f} | {c['several_request_bytes_per_payout']:,.0f} "
            f"| {c['several_extra_payouts']} |"
        )
    lines += [
        "",
        "Counted by a plugin's `before_model_callback`; a request's "
        "bytes are its contents, system instruction and tool declarations as JSON. One flow "
        "per configuration of section 2 (and per store for `confirmation`) counts the model calls of the "
        "request and of the approval apart, then sends the same approval again (for `confirmation`: the "
        "same `{\"confirmed\": true}` FunctionResponse to the same `adk_request_confirmation` call); each "
        "figure is the largest seen. \"Two at once\": one message naming two expenses above the "
        "limit (two pending calls from one model turn), approved one after the other. Tokens "
        "cannot be counted offline (Gemini's tokenizer is not on this machine); at about 4 bytes "
        "a token, divide the bytes by 4 for an estimate.",
        "",
        "## 2. One flow at a time (request + approval + payout)",
        "",
        "| System | Store | Session service | ms per flow | ms per flow, pass by pass |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in results["per_flow"]:
        lines.append(
            f"| {row['system']} | {STORE_LABELS[row['store']]} | {row['service']} | {_ms(row['flow_s'])} "
            f"| {', '.join(_ms(b) for b in row['batches_s'])} |"
        )
    lines += [
        "",
        f"Each pass runs {results['config']['flows_per_repeat']} flows on every configuration, "
        f"one flow on each in turn, after {results['config']['warmup_flows']} warm-up flows, so "
        "noise on this shared machine hits them alike; a pass's figure is the median of its flows, "
        "and ms per flow the median of the passes. A ratio to the seed is taken within each "
        "pass (ours / seed on the same store and session service), and its median and range are in the "
        "targets above.",
        "",
        "### Where one flow's time goes",
        "",
        "| System | Store | ms per flow | session store ms (calls) | ledger ms | ledger round trips "
        "(statements) | runner, guard, tools, model ms |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in results["breakdown"]:
        lines.append(
            f"| {row['system']} | {STORE_LABELS[row['store']]} | {_ms(row['flow_s'])} "
            f"| {_ms(row['session_store_s'])} ({row['session_store_calls']:.0f}) "
            f"| {_ms(row['ledger_s'])} | {row.get('ledger_round_trips', 0):.0f} "
            f"({row.get('ledger_statements', 0):.0f}) | {_ms(row['rest_s'])} |"
        )
    lines += [
        "",
        f"{results['breakdown'][0]['flows']} flows in a row per configuration, the seed on the session service "
        "this project uses on the store, with the session service's methods timed (one pass, after the "
        "warm-up). A ledger round trip is one visit of the ledger to its database: a connection checked "
        "out, one transaction (or one read) sent on it, checked back in; the ledger's time is its visits', "
        "checkout to checkin (benchmarks/breakdown.py).",
        "",
        "## 3. Concurrent flows",
        "",
        "| System | Store | Flows at once | Wall s | Flows/s | CPU ms per flow | Errors "
        "| Double payouts | Peak RSS MB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in results["concurrency"]:
        errors = str(row["errors"])
        if row["error_kinds"]:
            errors += " (" + "; ".join(f"{n}x {k[:70]}" for k, n in row["error_kinds"].items()) + ")"
        lines.append(
            f"| {row['system']} | {STORE_LABELS[row['store']]} ({row['service']}) "
            f"| {row['flows']:,} | {row['wall_s']:.1f} ({row['repeats']}) | {row['flows_per_s']:.1f} "
            f"| {row['cpu_ms_per_flow']:.0f} | {errors} | {row['double_payouts']} | {row['peak_rss_mb']:.0f} |"
        )
    lines += [
        "",
        "Each run is a fresh process on a fresh database, with all flows launched at once on one "
        "event loop (asyncio.gather), after one warm-up flow that creates the tables. Flows/s counts "
        "completed flows only; an error is a flow that raised or ended without exactly one payout. "
        "CPU ms per flow is the process's CPU time (all its threads) while the flows ran, divided "
        "by the flows.",
        "",
        *_inbox(results["inbox"]),
        "",
        *_by_backlog("5. Resuming one ticket with many pending",
                     "Approve + resume + payout ms", results["resume"]),
        "",
        "The backlog is real rows: one genuine pending request, copied by SQL (ticket, audit row, "
        "session and its events) with new keys, then ANALYZE / VACUUM ANALYZE.",
        "",
        *_replicas(results.get("replicas") or {}, results["machine"]["cores"]),
        "",
        "## 7. `python main.py`, cold",
        "",
        "| Wall s | Fastest run s | To the first model call s | The seed's pattern to its first model call s "
        "| Peak RSS MB | Runs |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| {results['demo']['wall_s']:.2f} | {results['demo']['fastest_wall_s']:.2f} "
        f"| {results['demo']['first_call_s']:.2f} | {results['demo']['seed_first_call_s']:.2f} "
        f"| {results['demo']['peak_rss_mb']:.0f} | {results['demo']['runs']:.0f} |",
        "",
        "A new interpreter in an empty directory each time (new SQLite store), timed around the "
        "process and to the line that shows the first model call's answer; peak RSS is the child's "
        "own. The bytecode a first run writes is already written (one untimed run of each command "
        "first), as on any machine after a first run. The seed's pattern (benchmarks/seed_cold.py) "
        "runs right after each `python main.py`, cold the same way: ADK's imports, a "
        "LongRunningFunctionTool agent on ADK's DatabaseSessionService in a new SQLite file, one request "
        "to its first model call; the ratio is taken run by run.",
        "",
    ]
    lines += audit_chain.report(results.get("audit_chain", []))
    if results.get("notes"):
        lines += ["## Notes", ""] + [f"- {note}" for note in results["notes"]] + [""]
    return "\n".join(lines)


def _inbox(rows: list[dict[str, Any]]) -> list[str]:
    """Section 4: the inbox's one read per store and size, and the plans."""
    lines = [
        "## 4. Approver inbox: the read behind GET /api/approvals",
        "",
        "| Store | Pending | Decided | Whole read ms | Queries of the backlog without an index |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(f"| {STORE_LABELS[row['store']]} | {row['pending']:,} | {row['decided']:,} "
                     f"| {_ms(row['median_s'])} ({row['repeats']}) | {', '.join(row['unindexed']) or 'none'} |")
    lines += [
        "",
        "The whole read is `ledger.inbox.read(...)` with the API's defaults, what `GET /api/approvals` "
        "runs (and `.venv/bin/expenses inbox`, without the recent decisions): the expiry sweep's SELECT, "
        "50 pending tickets and their total, 50 undelivered decisions and their total, the 10 latest "
        "decisions, and the page's requesters' other tickets and payouts without approval that day "
        "(few whatever the backlog: their plans are shown, but only the six queries of the backlog "
        "must read an index). The store holds the decided tickets (delivered long ago, plus 5 whose "
        "delivery failed) beside the pending ones, all copies of one real ticket row, each another "
        "requester's; ANALYZE / VACUUM ANALYZE after each growth. The sizes run one after another, not in turns.",
    ]
    biggest: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["pending"] >= biggest.get(row["store"], {"pending": -1})["pending"]:
            biggest[row["store"]] = row
    for store, row in biggest.items():
        lines += ["", f"Plans on {STORE_LABELS[store]} at {row['pending']:,} pending "
                      f"({'EXPLAIN QUERY PLAN' if store == 'sqlite' else 'EXPLAIN'}):", ""]
        lines += [f"- {query}: `{plan}`" for query, plan in row["plans"].items()]
    return lines


def _replicas(summary: dict[str, Any], cores: int) -> list[str]:
    """Section 6: flows/s with 1 and 2 servers on one PostgreSQL database."""
    title = ["## 6. Throughput per replica (PostgreSQL)", ""]
    if not summary:
        return title + ["Not measured: it needs PostgreSQL."]
    lines = title + ["| Replicas | Flows/s | Errors | Flow p50 s |", "| --- | --- | --- | --- |"]
    for row in summary["by_replicas"]:
        lines.append(f"| {row['replicas']} | {row['flows_per_s']:.1f} ({summary['repeats']}) | {row['errors']} "
                     f"| {row['flow_p50_s']:.2f} |")
    return lines + [
        "",
        f"2 replicas / 1 replica: **{summary['ratio']:.2f}x**. Double payouts over all runs: "
        f"{summary['double_payouts']}.",
        "",
        "Each replica is `python -m long_running_agent.web` in its own process, all on one PostgreSQL "
        "database whose schema is made once before they start. A load generator in the benchmark's process "
        "runs whole flows over HTTP on 127.0.0.1 (create a session, POST /run, POST "
        f"/api/approvals/ID/approve), {summary['in_flight_per_replica']} at once per replica, "
        f"{summary['flows_per_replica']} flows per replica per run; with 2 replicas each approval goes "
        "to the other replica than the one that opened the ticket. Runs alternate 1 and 2 replicas; "
        "figures are medians over the runs. The replicas, PostgreSQL and the load generator share "
        f"this machine's {cores} cores.",
    ]


def _by_backlog(title: str, measure: str, rows: list[dict[str, Any]]) -> list[str]:
    """A section with one median per store and number of pending tickets."""
    return [f"## {title}", "", f"| Store | Pending tickets | {measure} |", "| --- | --- | --- |"] + [
        f"| {STORE_LABELS[row['store']]} | {row['pending']:,} | {_ms(row['median_s'])} |" for row in rows
    ]
