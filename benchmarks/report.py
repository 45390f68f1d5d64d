"""Turning the measurements into benchmarks/results.md, results.json and docs/performance.png."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import audit_chain

STORE_LABELS = {"memory": "in-memory", "sqlite": "SQLite file", "postgres": "PostgreSQL"}
SEED_SERVICES = {
    "memory": "InMemorySessionService",
    "sqlite": "SqliteSessionService",
    "postgres": "DatabaseSessionService",
}
OUR_STORAGE = {
    "memory": "InMemorySessionService + ledger on in-memory SQLite",
    "sqlite": "DatabaseSessionService + ledger, one SQLite file",
    "postgres": "DatabaseSessionService + ledger, one PostgreSQL database",
}


SYSTEMS = ("ours", "seed", "confirmation")


def storage(system: str, store: str) -> str:
    return OUR_STORAGE[store] if system == "ours" else SEED_SERVICES[store]


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
        f"Each figure is a median over repeated runs (repeats in brackets); ratios compare "
        f"figures from this one run. Whole run: {results['run_seconds']:.0f} s.",
        "",
        "`ours` is this project as shipped (the App with its ApprovalGuard, sessions in "
        "DatabaseSessionService, the ledger beside them); `seed` is the seed's pattern: a plain "
        "LongRunningFunctionTool agent on the same model, tools that just answer pending/paid, "
        "no ledger, no guard, on ADK's stock session services; `confirmation` is ADK's own tool "
        "confirmation on the same stock services: one tool, `FunctionTool(reimburse, "
        "require_confirmation=<amount above the limit>)`, approved by answering ADK's "
        "`adk_request_confirmation` call with `{\"confirmed\": true}`. Our in-memory configuration is "
        "InMemorySessionService with the ledger on an in-memory SQLite database "
        "(`sqlite+aiosqlite://`).",
        "",
        "## Targets",
        "",
        "| Target | Measured | Result |",
        "| --- | --- | --- |",
    ]
    for target in results["targets"]:
        lines.append(f"| {target['target']} | {target['measured']} | {_mark(target['met'])} |")
    from .run import RETIRED

    lines += ["", *_retired(RETIRED, results["concurrency"])]

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
        "Counted by a plugin's `before_model_callback` over every flow of section 2; a request's "
        "bytes are its contents, system instruction and tool declarations as JSON. One more flow "
        "per configuration counts the model calls of the request and of the approval apart, then "
        "sends the same approval again (for `confirmation`: the same `{\"confirmed\": true}` "
        "FunctionResponse to the same `adk_request_confirmation` call), on every store; each "
        "figure is the largest seen. \"Two at once\": one message naming two expenses above the "
        "limit (two pending calls from one model turn), approved one after the other. Tokens "
        "cannot be counted offline (Gemini's tokenizer is not on this machine); at about 4 bytes "
        "a token, divide the bytes by 4 for an estimate.",
        "",
        "## 2. One flow at a time (request + approval + payout)",
        "",
        "| System | Store | Storage | ms per flow | request ms | approval + payout ms | x in-memory |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in results["per_flow"]:
        lines.append(
            f"| {row['system']} | {STORE_LABELS[row['store']]} | {storage(row['system'], row['store'])} "
            f"| {_ms(row['flow_s'])} ({row['repeats']}) | {_ms(row['request_s'])} | {_ms(row['approve_s'])} "
            f"| {row['x_memory']:.2f} |"
        )
    lines += [
        "",
        f"Each pass runs {results['config']['flows_per_repeat']} flows on every configuration, "
        f"one flow on each in turn, after {results['config']['warmup_flows']} warm-up flows, so "
        "noise on this shared machine hits them alike; a figure is the median of a pass's flows, "
        "then the median of the passes (in brackets). A ratio to the seed is taken within each "
        "pass (ours / seed on the same store), and its median and range are in the targets above.",
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
        f"{results['breakdown'][0]['flows']} flows in a row per configuration, with the session "
        "service's and the ledger's methods timed (one pass, after the warm-up). A ledger round trip "
        "is one visit of the ledger to its database: a connection checked out, one transaction (or "
        "one read) sent on it, checked back in (benchmarks/breakdown.py).",
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
            f"| {row['system']} | {STORE_LABELS[row['store']]} ({storage(row['system'], row['store']).split(' ')[0]}) "
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
        *_replicas(results.get("replicas") or {}, results["machine"]),
        "",
        "## 7. `python main.py`, cold",
        "",
        "| Wall s | Fastest run s | To the first model call s | The seed's pattern to its first model call s "
        "| Import main only s | `import google.adk` s | The seed's ADK imports s | Peak RSS MB | Runs |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {results['demo']['wall_s']:.2f} | {results['demo']['fastest_wall_s']:.2f} "
        f"| {_s(results['demo'].get('first_call_s'))} | {_s(results['demo'].get('seed_first_call_s'))} "
        f"| {results['demo']['import_wall_s']:.2f} | {_s(results['demo'].get('adk_import_wall_s'))} "
        f"| {_s(results['demo'].get('seed_imports_wall_s'))} "
        f"| {results['demo']['peak_rss_mb']:.0f} | {results['demo']['runs']:.0f} |",
        "",
        "A new interpreter in an empty directory each time (new SQLite store), timed around the "
        "process and to the line that shows the first model call's answer; peak RSS is the child's "
        "own. The bytecode a first run writes is already written (one untimed run of each command "
        "first), as on any machine after a first run. The seed's pattern (benchmarks/seed_cold.py) "
        "runs right after each `python main.py`, cold the same way: ADK's imports, a "
        "LongRunningFunctionTool agent on ADK's SqliteSessionService in a new file, one request to "
        "its first model call; the ratio is taken run by run. \"Import main only\" is `python -c "
        "\"import main\"`; `import google.adk` imports ADK's package alone (it loads its parts "
        "lazily); \"the seed's ADK imports\" are what the seed's pattern imports to run (LlmAgent, "
        "App, Runner, LongRunningFunctionTool, DatabaseSessionService).",
        "",
    ]
    lines += audit_chain.report(results.get("audit_chain", []))
    if results.get("notes"):
        lines += ["## Notes", ""] + [f"- {note}" for note in results["notes"]] + [""]
    return "\n".join(lines)


def _retired(retired: tuple[str, ...], concurrency: list[dict[str, Any]]) -> list[str]:
    """Why the retired targets were retired, in this run's figures."""
    by_run = {(r["system"], r["store"], r["flows"]): r for r in concurrency}
    seed, ours = by_run.get(("seed", "postgres", 100)), by_run.get(("ours", "sqlite", 1000))
    why = ("One process runs its flows on one core (one event loop, one GIL), so it completes at most "
           "1,000 / (CPU ms per flow) flows a second")
    if seed and ours:
        why += (f": the seed's bare pattern on ADK's DatabaseSessionService used {seed['cpu_ms_per_flow']:.0f} ms "
                f"of CPU per flow (100 at once on PostgreSQL), a ceiling of {1000 / seed['cpu_ms_per_flow']:.0f} "
                f"flows/s before any ledger; this project used {ours['cpu_ms_per_flow']:.0f} ms with 1,000 at "
                "once on SQLite")
    return [f"Retired: {'; '.join(repr(t) for t in retired)}. {why}. The per-flow ratios to the seed and CPU per "
            "flow above measure what this project adds to ADK instead; more flows a second come from more "
            "cores and replicas (section 6)."]


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f}"


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.0f}x"


def _inbox(rows: list[dict[str, Any]]) -> list[str]:
    """Section 4: the inbox's one read per store and size, each query's share, and the plans."""
    from .inbox import QUERIES

    lines = [
        "## 4. Approver inbox: the read behind GET /api/approvals",
        "",
        "| Store | Pending | Decided | Whole read ms | " + " | ".join(f"{q} ms" for q in QUERIES)
        + " | Queries without an index |",
        "| --- | --- | --- | --- | " + " | ".join("---" for _ in QUERIES) + " | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {STORE_LABELS[row['store']]} | {row['pending']:,} | {row['decided']:,} "
            f"| {_ms(row['median_s'])} ({row['repeats']}) | "
            + " | ".join(f"{row['query_ms'][q]:.2f}" for q in QUERIES)
            + f" | {', '.join(row['unindexed']) or 'none'} |"
        )
    lines += [
        "",
        "The whole read is `ledger.inbox.read(...)` with the API's defaults, what `GET /api/approvals` "
        "runs (and `.venv/bin/expenses inbox`, without the recent decisions): the expiry sweep's SELECT, "
        "50 pending tickets and their total, 50 undelivered decisions and their total, the 10 latest "
        "decisions, and the page's requesters' other tickets and payouts without approval that day "
        "(few whatever the backlog: their plans are shown, but only the six queries of the backlog "
        "must read an index). Each query's time is its median at the driver (statement sent to "
        "result); the rest of the whole read is the ORM, the session and the connection check-out. "
        "The store holds the decided tickets (delivered long ago, plus 5 whose delivery failed) beside "
        "the pending ones, all copies of one real ticket row, each another requester's; ANALYZE / "
        "VACUUM ANALYZE after each growth. The sizes run one after another, not in turns.",
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


def _replicas(summary: dict[str, Any], machine: dict[str, Any]) -> list[str]:
    """Section 6: flows/s and CPU per flow with 1 and 2 servers on one PostgreSQL database."""
    title = ["## 6. Throughput per replica (PostgreSQL)", ""]
    if not summary:
        return title + ["Not measured: it needs PostgreSQL."]
    lines = title + [
        "| Replicas | Flows/s | Errors | Flow p50 s | Replica CPU ms/flow | PostgreSQL CPU ms/flow "
        "| Load generator CPU ms/flow | Replicas busy (cores) | Machine busy (cores) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in summary["by_replicas"]:
        lines.append(
            f"| {row['replicas']} | {row['flows_per_s']:.1f} ({summary['repeats']}) | {row['errors']} "
            f"| {row['flow_p50_s']:.2f} | {row['replica_cpu_ms_per_flow']:.0f} "
            f"| {row['postgres_cpu_ms_per_flow']:.0f} | {row['load_generator_cpu_ms_per_flow']:.0f} "
            f"| {row['replica_busy_cores']:.2f} | {row['machine_busy_cores']:.2f} of {machine['cores']} |"
        )
    one, two = summary["by_replicas"]
    server_ms = two["replica_cpu_ms_per_flow"] + two["postgres_cpu_ms_per_flow"]
    lines += [
        "",
        f"2 replicas / 1 replica: **{summary['ratio']:.2f}x**. Double payouts over all runs: "
        f"{summary['double_payouts']}. A replica and PostgreSQL together used {server_ms:.0f} ms of "
        f"CPU per flow, so this machine's {machine['cores']} cores allow at most about "
        f"{machine['cores'] * 1000 / server_ms:.0f} flows/s however many replicas run (less the load "
        "generator's share).",
        "",
        f"Each replica is `python -m long_running_agent.web` in its own process, all on one PostgreSQL "
        f"database whose schema is made once before they start; "
        f"{'each pinned to a core' if summary['pinned'] else 'not pinned to cores'}. A load generator "
        f"in the benchmark's process runs whole flows over HTTP on 127.0.0.1 (create a session, POST "
        f"/run, POST /api/approvals/ID/approve), {summary['in_flight_per_replica']} at once per replica, "
        f"{summary['flows_per_replica']} flows per replica per run; with 2 replicas each approval goes "
        "to the other replica than the one that opened the ticket. Runs alternate 1 and 2 replicas; "
        "figures are medians over the runs. CPU per flow comes from /proc (replicas, PostgreSQL's "
        "processes) and the load generator's own process time; machine busy counts every process on "
        "the machine, other users' too.",
    ]
    return lines


def _by_backlog(title: str, measure: str, rows: list[dict[str, Any]]) -> list[str]:
    """A section with one median per store and number of pending tickets."""
    return [f"## {title}", "", f"| Store | Pending tickets | {measure} |", "| --- | --- | --- |"] + [
        f"| {STORE_LABELS[row['store']]} | {row['pending']:,} | {_ms(row['median_s'])} |" for row in rows
    ]


def chart(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"ours": "#1a73e8", "seed": "#9aa0a6", "confirmation": "#34a853"}
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    m = results["machine"]
    fig.suptitle(
        f"Approval flow: this project (ours) vs the seed's pattern and ADK's tool confirmation - offline model, "
        f"{m['cores']} cores, Python {m['python']}, ADK {m['google_adk']}",
        fontsize=11,
    )

    ax = axes[0][0]
    stores = [s for s in ("memory", "sqlite", "postgres") if any(r["store"] == s for r in results["per_flow"])]
    for offset, system in ((-0.27, "ours"), (0.0, "seed"), (0.27, "confirmation")):
        values = [
            next((r["flow_s"] * 1000 for r in results["per_flow"] if r["system"] == system and r["store"] == s), 0)
            for s in stores
        ]
        bars = ax.bar([i + offset for i in range(len(stores))], values, 0.27, label=system, color=colors[system])
        ax.bar_label(bars, fmt="%.0f", fontsize=8)
    ours_memory = next(
        r["flow_s"] * 1000 for r in results["per_flow"] if r["system"] == "ours" and r["store"] == "memory"
    )
    ax.axhline(2 * ours_memory, color="#d93025", linestyle="--", linewidth=1, label="2x ours in-memory")
    ax.set_xticks(range(len(stores)), [STORE_LABELS[s] for s in stores])
    ax.set_ylabel("ms per flow (median)")
    ax.set_title("1. One flow: request + approval + payout", fontsize=10)
    ax.legend(fontsize=8)

    ax = axes[0][1]
    rows = results["concurrency"]
    labels = [f"{r['system']}\n{STORE_LABELS[r['store']]}\n{r['flows']:,}" for r in rows]
    bars = ax.bar(range(len(rows)), [r["flows_per_s"] for r in rows],
                  color=[colors[r["system"]] for r in rows])
    for bar, r in zip(bars, rows, strict=True):
        note = f"{r['flows_per_s']:.0f}/s" + (f"\n{r['errors']} err" if r["errors"] else "")
        ax.annotate(note, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                    va="bottom", fontsize=7, color="#d93025" if r["errors"] else "black")
    ax.set_xticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylabel("completed flows per second")
    ax.set_title("2. Concurrent flows (errors in red)", fontsize=10)

    ax = axes[1][0]
    for store in ("sqlite", "postgres"):
        points = [r for r in results["inbox"] if r["store"] == store]
        if points:
            ax.plot([r["pending"] for r in points], [r["median_s"] * 1000 for r in points], marker="o",
                    label=STORE_LABELS[store])
    ax.axhline(20, color="#d93025", linestyle="--", linewidth=1, label="target: 20 ms")
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("pending tickets")
    ax.set_ylabel("ms (median)")
    ax.set_title("3. Approver inbox: the read behind GET /api/approvals", fontsize=10)
    ax.legend(fontsize=8)

    ax = axes[1][1]
    resume = results["resume"]
    labels = [f"{STORE_LABELS[r['store']]}\n{r['pending']:,} pending" for r in resume]
    bars = ax.bar(range(len(resume)), [r["median_s"] * 1000 for r in resume], color=colors["ours"])
    ax.bar_label(bars, fmt="%.0f ms", fontsize=8)
    ax.set_xticks(range(len(resume)), labels, fontsize=8)
    ax.set_ylabel("ms (median)")
    demo = results["demo"]
    ax.set_title(
        f"4. Approve + resume one ticket  |  python main.py cold: {demo['wall_s']:.2f} s, "
        f"{demo['peak_rss_mb']:.0f} MB", fontsize=10,
    )

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
