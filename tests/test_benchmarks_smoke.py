"""The benchmark code, run at tiny sizes: the counted properties, never the timings.

The full run is `make bench`; this only proves its measurements count what
they claim (a duplicate approval costs this project and ADK's tool
confirmation nothing and the seed's pattern a second payout, the seed runs on
this project's session service on each store, concurrent flows pay each
ticket once, the backlog really holds the pending and decided tickets and
every inbox query reads an index, two real replicas on one PostgreSQL
database complete every flow), that the report marks each target, and that a
developer's `.env` neither stops nor changes the quick run.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.environment import app_variables
from support.processes import ROOT
from support.project import cloned_project

from benchmarks.audit_chain import measure_audit_chain
from benchmarks.breakdown import measure_breakdown
from benchmarks.concurrency import run_flows
from benchmarks.environment import APP_VARIABLES
from benchmarks.inbox import QUERIES, UNDELIVERED, measure_inbox
from benchmarks.per_flow import measure_per_flow
from benchmarks.replicas import measure_replicas
from benchmarks.scale import measure_resume
from benchmarks.stores import Stores


@pytest.fixture
def stores(tmp_path: Path) -> Stores:
    # The benchmarks build desks of their own, on their pinned settings (benchmarks/environment.py).
    return Stores(tmp_path, postgres_url=None)


async def test_duplicate_approval_costs_ours_and_adk_confirmation_nothing_and_the_seed_a_second_payout(
    stores: Stores,
) -> None:
    rows, cost = await measure_per_flow(stores, repeats=1, flows_per_repeat=1, warmup_flows=1)

    # Ours and the seed on the same session service per store; the seed on ADK's SqliteSessionService beside.
    assert {(r["system"], r["store"], r["service"]) for r in rows} == {
        (system, "memory", "InMemorySessionService") for system in ("ours", "seed")} | {
        (system, "sqlite", "DatabaseSessionService") for system in ("ours", "seed")} | {
        ("seed", "sqlite", "SqliteSessionService")}
    assert cost["ours"]["duplicate_extra_model_calls"] == 0
    assert cost["ours"]["duplicate_extra_payouts"] == 0
    assert cost["seed"]["duplicate_extra_model_calls"] > 0
    assert cost["seed"]["duplicate_extra_payouts"] > 0
    assert cost["ours"]["model_calls_per_payout"] <= cost["seed"]["model_calls_per_payout"]
    # What the model reads, measured side by side: this project's requests are no larger than the plain pattern's.
    assert 0 < cost["ours"]["request_bytes_per_payout"] <= cost["seed"]["request_bytes_per_payout"]
    # Two approvals from one model turn: each paid once here; the plain pattern pays the first one again.
    assert cost["ours"]["several_extra_payouts"] == 0 and cost["seed"]["several_extra_payouts"] == 1
    assert cost["ours"]["several_model_calls_per_payout"] <= 4
    assert 0 < cost["ours"]["several_request_bytes_per_payout"] <= cost["seed"]["several_request_bytes_per_payout"]
    # ADK's confirmation: one model call to ask, one after the confirmation; a resent one runs nothing.
    confirmation = cost["confirmation"]
    assert (confirmation["request_model_calls"], confirmation["approval_model_calls"]) == (1, 1)
    assert confirmation["model_calls_per_payout"] == 2
    assert (confirmation["duplicate_extra_model_calls"], confirmation["duplicate_extra_payouts"]) == (0, 0)


async def test_breakdown_times_the_ledger_only_where_there_is_one(stores: Stores) -> None:
    rows = await measure_breakdown(stores, flows=1, warmup_flows=1)

    assert all(r["session_store_calls"] > 0 for r in rows)
    trips = {(r["system"], r["store"]): (r["ledger_round_trips"], r["ledger_s"]) for r in rows}
    assert trips[("seed", "sqlite")] == (0, 0)
    assert 0 < trips[("ours", "sqlite")][0] <= 6 and trips[("ours", "sqlite")][1] > 0


async def test_the_audit_chain_is_measured_against_flows_that_really_wrote_plain_rows(stores: Stores) -> None:
    rows = await measure_audit_chain(stores, repeats=1, flows_per_repeat=2, warmup_flows=1)

    assert [r["store"] for r in rows] == ["memory", "sqlite"]
    assert all(r["chains_hold"] and r["chains_verified"] == 3 for r in rows), "three flows each, their chains hold"
    assert all(r["plain_rows_chained"] == 0 for r in rows), "the plain side's flows wrote unchained rows"


async def test_concurrent_flows_pay_each_ticket_exactly_once(stores: Stores) -> None:
    result = await run_flows("ours", "sqlite", await stores.fresh("sqlite"), flows=6)

    assert (result["completed"], result["errors"], result["double_payouts"]) == (6, 0, 0)
    assert result["model_calls"] == 4 * 7  # six flows and the warm-up, four calls each


async def test_backlog_holds_the_pending_tickets_and_resumes_still_pay(stores: Stores) -> None:
    resume = await measure_resume(stores, sizes=[10, 100], repeats=1)

    assert [(r["store"], r["pending"]) for r in resume] == [("sqlite", 10), ("sqlite", 100)]


async def test_inbox_read_sees_pending_and_decided_tickets_and_every_query_reads_an_index(stores: Stores) -> None:
    rows = await measure_inbox(stores, sizes=[30, 120], decided=200, repeats=2)

    assert [(r["store"], r["pending"], r["decided"]) for r in rows] == [
        ("sqlite", 30, 200 + UNDELIVERED), ("sqlite", 120, 200 + UNDELIVERED)]
    for row in rows:
        # The API's first pages: 50 pending at most, the undelivered few, the 10 latest decisions.
        assert row["shown"] == {"pending": min(50, row["pending"]), "total_pending": row["pending"],
                                "undelivered": UNDELIVERED, "total_undelivered": UNDELIVERED,
                                "recent_decisions": 10}
        assert list(row["plans"]) == list(QUERIES)
        assert row["unindexed"] == [], row["plans"]


@pytest.mark.postgres
@pytest.mark.subprocess
def test_two_replicas_complete_every_flow_and_approve_across_processes(tmp_path: Path, postgres_admin_url) -> None:
    summary = measure_replicas(Stores(tmp_path, postgres_url=postgres_admin_url),
                               flows_per_replica=2, in_flight=1, repeats=1, warmup_flows=1)

    one, two = summary["runs"]
    assert (one["replicas"], one["completed"], one["errors"], one["approved_on_the_other_replica"]) == (1, 2, 0, 0)
    assert (two["replicas"], two["completed"], two["errors"], two["approved_on_the_other_replica"]) == (2, 4, 0, 4)
    assert summary["double_payouts"] == 0
    assert summary["ratio"] > 0


def test_report_judges_each_ratio_on_the_median_of_its_passes() -> None:
    from benchmarks.report import markdown
    from benchmarks.run import information, targets

    results = _tiny_results()
    results["targets"] = targets(results)
    results["information"] = information(results)
    text = markdown(results)

    assert "| Duplicate approval: 0 extra model calls, 0 extra payouts | ours 0 calls / 0 payouts" in text
    # 1.8x, 2.4x, 1.9x: a busy pass above 2x, the median within it.
    assert "| One flow, ours / seed on the same store and session service <= 2x (in-memory, " \
           "InMemorySessionService both) | median 1.90x (range 1.80x to 2.40x, 3 passes) | met |" in text
    assert "| One flow, ours / seed on the same store and session service <= 1.3x (SQLite file, " \
           "DatabaseSessionService both) | median 1.40x (range 1.20x to 1.50x, 3 passes) | **missed** |" in text
    assert "| CPU per flow, 100 flows at once on PostgreSQL, <= 1.3x the seed's (DatabaseSessionService both) " \
           "| 65.0 ms vs 50.0 ms; median 1.30x (range 1.20x to 1.40x, 3 passes) | met |" in text
    assert "cold to its first model call <= 1.5x the seed's pattern cold on the same session service " \
           "(median of pairs) | 1.50 s vs 1.20 s; median 1.25x (range 1.20x to 1.30x, 2 passes) | met |" in text
    assert "| Ledger round trips per approved flow <= 6 | in-memory 6 (17 statements); SQLite 6 (17 statements) " \
           "| met |" in text
    # ADK's SqliteSessionService: information, with its lock failures counted, never a target.
    assert "- One flow on a SQLite file, ours (DatabaseSessionService) / the seed on ADK's SqliteSessionService: " \
           "median 2.00x (range 2.00x to 2.00x, 3 passes)." in text
    assert "- 1,000 flows at once on one SQLite file, the seed on ADK's SqliteSessionService: 788 failed, 788 of " \
           'them to "database is locked" (section 3).' in text
    assert "SqliteSessionService" not in "".join(t["target"] for t in results["targets"])
    assert "- 1,000 concurrent flows on SQLite: >= 50 flows/s: " in text
    assert "| confirmation | 2.00 | 1 + 1 |" in text
    assert "| Inbox read about flat: at 100,000 pending <= 1.5x at 1,000 (sqlite) | 18.0 ms vs 6.0 ms = 3.00x " \
           "| **missed** |" in text
    assert "| Every inbox query of the backlog reads an index, no sort on the side, at every size (sqlite) " \
           "| pending total at 100,000 | **missed** |" in text
    assert "2 replicas / 1 replica: **1.50x**" in text
    assert "| 2 replicas on one PostgreSQL database: 0 errors, 0 double payouts | 0 errors, 0 double payouts " \
           "| met |" in text


def test_the_processes_the_benchmark_starts_clear_every_variable_the_app_reads() -> None:
    assert APP_VARIABLES == app_variables()


@pytest.mark.subprocess
def test_a_policy_in_env_neither_stops_nor_changes_the_quick_run(tmp_path: Path) -> None:
    # docs/policy.md's steps, in a copy of the project: its policy file, and APPROVAL_POLICY and APPROVERS in .env.
    project, steps = cloned_project(tmp_path), (ROOT / "docs" / "policy.md").read_text()
    policy = re.search(r"```toml\n(# policy.toml\n.*?)```", steps, re.S)
    approvers = re.search(r"^APPROVERS=\S+", steps, re.M)
    assert policy and approvers, "docs/policy.md no longer shows a policy file and its APPROVERS"
    (project / "policy.toml").write_text(policy.group(1))
    (project / ".env").write_text(f"APPROVAL_POLICY=policy.toml\n{approvers.group(0)}\n")
    env = {k: v for k, v in os.environ.items() if k not in app_variables()}  # what the app reads comes from .env
    seen = subprocess.run([sys.executable, "-c", "from long_running_agent.settings import load_settings; "
                           "print(load_settings().approval_policy)"], cwd=project, env=env, capture_output=True,
                          text=True, timeout=120)
    assert seen.stdout.strip() == "policy.toml", seen.stderr  # the app started there runs on the policy

    run = subprocess.run([sys.executable, "-m", "benchmarks.run", "--quick", "--no-postgres"], cwd=project, env=env,
                         capture_output=True, text=True, timeout=900)

    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
    # What the model is sent depends on the settings (the instruction names the limits): the same as without .env.
    _rows, cost = asyncio.run(measure_per_flow(Stores(tmp_path, postgres_url=None), repeats=1, flows_per_repeat=1,
                                               warmup_flows=0))
    ours, seed = cost["ours"], cost["seed"]
    assert f"| Request bytes per approved payout <= baseline | ours {ours['request_bytes_per_payout']:,.0f}, " \
           f"seed {seed['request_bytes_per_payout']:,.0f}; two at once: " \
           f"ours {ours['several_request_bytes_per_payout']:,.0f}, " \
           f"seed {seed['several_request_bytes_per_payout']:,.0f} | met |" in run.stdout


def _tiny_results() -> dict:
    cost = {"model_calls_per_payout": 4.0, "request_bytes_per_payout": 9000.0, "request_model_calls": 2,
            "approval_model_calls": 2, "duplicate_events": 1, "duplicate_replies": 1,
            "several_model_calls_per_payout": 3.0, "several_request_bytes_per_payout": 8000.0,
            "several_extra_payouts": 0}
    services = {"memory": "InMemorySessionService", "sqlite": "DatabaseSessionService"}
    # ours / seed per pass: 1.8x, 2.4x and 1.9x in memory, 1.2x, 1.4x and 1.5x on SQLite; 2x the seed on SQLite's own.
    passes = {("ours", "memory"): [0.036, 0.048, 0.038], ("ours", "sqlite"): [0.12, 0.14, 0.15],
              ("seed", "memory"): [0.02] * 3, ("seed", "sqlite"): [0.1] * 3}
    per_flow = [{"system": system, "store": store, "service": services[store], "flow_s": sorted(batches)[1],
                 "batches_s": batches, "repeats": 3, "flows_timed": 3} for (system, store), batches in passes.items()]
    per_flow.append({"system": "seed", "store": "sqlite", "service": "SqliteSessionService", "flow_s": 0.07,
                     "batches_s": [0.06, 0.07, 0.075], "repeats": 3, "flows_timed": 3})
    return {
        "date": "2026-01-01",
        "run_seconds": 1.0,
        "machine": {"cores": 2, "cpu": "cpu", "memory_gb": 1, "os": "os", "python": "3.11",
                    "google_adk": "2.13.0", "sqlalchemy": "2", "sqlite": "3", "postgresql": "15"},
        "config": {"flows_per_repeat": 1, "warmup_flows": 1},
        "cost": {
            "ours": {**cost, "duplicate_extra_model_calls": 0, "duplicate_extra_payouts": 0},
            "seed": {**cost, "duplicate_extra_model_calls": 2, "duplicate_extra_payouts": 1},
            "confirmation": {**cost, "model_calls_per_payout": 2.0, "request_model_calls": 1,
                             "approval_model_calls": 1, "duplicate_extra_model_calls": 0,
                             "duplicate_extra_payouts": 0, "duplicate_events": 0, "duplicate_replies": 0},
        },
        "per_flow": per_flow,
        "breakdown": [
            {"system": system, "store": store, "flows": 1, "flow_s": 0.08, "session_store_s": 0.05,
             "session_store_calls": 11.0, "ledger_s": 0.02 if system == "ours" else 0.0,
             "ledger_round_trips": 6.0 if system == "ours" else 0.0,
             "ledger_statements": 17.0 if system == "ours" else 0.0, "rest_s": 0.01}
            for system in ("ours", "seed") for store in ("memory", "sqlite")
        ],
        "concurrency": [
            _burst("ours", "sqlite", "DatabaseSessionService", 1000, [110.0], {}),
            _burst("seed", "sqlite", "SqliteSessionService", 1000, [17.0],
                   {"OperationalError: database is locked": 788}),
            _burst("ours", "postgres", "DatabaseSessionService", 100, [60.0, 65.0, 70.0], {}),
            _burst("seed", "postgres", "DatabaseSessionService", 100, [50.0] * 3, {}),
        ],
        "inbox": [_inbox_row(1_000, 0.006, []), _inbox_row(100_000, 0.018, ["pending total"])],
        "replicas": {
            "runs": [], "in_flight_per_replica": 16, "flows_per_replica": 150, "repeats": 3,
            "double_payouts": 0, "ratio": 1.5,
            "by_replicas": [{"replicas": n, "flows_per_s": 8.0 * x, "errors": 0, "error_kinds": {},
                             "flow_p50_s": 1.5, "wall_s": 20.0} for n, x in ((1, 1.0), (2, 1.5))],
        },
        "resume": [{"store": "sqlite", "pending": 100, "median_s": 0.05},
                   {"store": "sqlite", "pending": 100_000, "median_s": 0.05}],
        "demo": {"wall_s": 1.8, "fastest_wall_s": 1.7, "peak_rss_mb": 130.0, "runs": 1.0,
                 "first_call_s": 1.5, "seed_first_call_s": 1.2, "x_seed_first_call": [1.2, 1.3]},
        "notes": [],
    }


def _burst(system: str, store: str, service: str, flows: int, cpu_ms: list[float], errors: dict[str, int]) -> dict:
    runs = [{"cpu_ms_per_flow": ms} for ms in cpu_ms]
    return {"system": system, "store": store, "service": service, "flows": flows, "repeats": len(runs),
            "wall_s": 10.0, "flows_per_s": 10.0, "cpu_ms_per_flow": sorted(cpu_ms)[len(cpu_ms) // 2],
            "errors": sum(errors.values()), "error_kinds": errors, "double_payouts": 0, "peak_rss_mb": 300.0,
            "runs": runs}


def _inbox_row(pending: int, median_s: float, unindexed: list[str]) -> dict:
    return {"store": "sqlite", "pending": pending, "decided": 100_005, "undelivered": 5, "repeats": 1,
            "median_s": median_s,
            "shown": {"pending": 50, "total_pending": pending, "undelivered": 5, "total_undelivered": 5,
                      "recent_decisions": 10},
            "plans": {q: "SEARCH approval_tickets USING INDEX ix" for q in QUERIES}, "unindexed": unindexed}
