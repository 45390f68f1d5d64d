"""The benchmark code, run at tiny sizes: the counted properties, never the timings.

The full run is `make bench`; this only proves its measurements count what
they claim (a duplicate approval costs this project nothing and the seed's
pattern a second payout, concurrent flows pay each ticket once, the backlog
really holds the pending tickets) and that the report and chart get written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.breakdown import measure_breakdown
from benchmarks.concurrency import run_flows
from benchmarks.environment import configure
from benchmarks.per_flow import measure_per_flow
from benchmarks.scale import measure_scale
from benchmarks.stores import Stores


@pytest.fixture
def stores(tmp_path: Path) -> Stores:
    configure()  # the benchmark's pinned settings; conftest restores the test's after it
    return Stores(tmp_path, postgres_url=None)


async def test_duplicate_approval_costs_ours_nothing_and_the_seed_a_second_payout(stores: Stores) -> None:
    rows, cost = await measure_per_flow(stores, repeats=2, flows_per_repeat=2, warmup_flows=1)

    assert {(r["system"], r["store"]) for r in rows} == {
        (system, store) for system in ("ours", "seed") for store in ("memory", "sqlite")
    }
    assert cost["ours"]["duplicate_extra_model_calls"] == 0
    assert cost["ours"]["duplicate_extra_payouts"] == 0
    assert cost["seed"]["duplicate_extra_model_calls"] > 0
    assert cost["seed"]["duplicate_extra_payouts"] > 0
    assert cost["ours"]["model_calls_per_payout"] <= cost["seed"]["model_calls_per_payout"]
    assert cost["ours"]["request_bytes_per_payout"] > 0


async def test_breakdown_times_the_ledger_only_where_there_is_one(stores: Stores) -> None:
    rows = await measure_breakdown(stores, flows=1, warmup_flows=1)

    calls = {(r["system"], r["store"]): (r["session_store_calls"], r["ledger_calls"]) for r in rows}
    assert calls[("seed", "sqlite")][1] == 0
    assert calls[("ours", "sqlite")][1] > 0
    assert all(session_calls > 0 for session_calls, _ledger in calls.values())


async def test_concurrent_flows_pay_each_ticket_exactly_once(stores: Stores) -> None:
    result = await run_flows("ours", "sqlite", await stores.fresh("sqlite"), flows=6)

    assert (result["completed"], result["errors"], result["double_payouts"]) == (6, 0, 0)
    assert result["model_calls"] == 4 * 7  # six flows and the warm-up, four calls each


async def test_backlog_holds_the_pending_tickets_and_resumes_still_pay(stores: Stores) -> None:
    inbox, resume = await measure_scale(
        stores, inbox_sizes=[100], resume_sizes=[10, 100], inbox_repeats=2, resume_repeats=2
    )

    assert [(r["store"], r["pending"]) for r in inbox] == [("sqlite", 100)]
    assert [(r["store"], r["pending"]) for r in resume] == [("sqlite", 10), ("sqlite", 100)]


def test_report_marks_each_target_and_draws_the_chart(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the chart needs the bench extra: pip install -e '.[bench]'")
    from benchmarks.report import chart, markdown
    from benchmarks.run import explain, targets

    results = _tiny_results()
    results["targets"] = targets(results)
    results["notes"] = explain(results)
    text = markdown(results)
    chart(results, tmp_path / "performance.png")

    assert "| Duplicate approval: 0 extra model calls, 0 extra payouts | ours 0 calls / 0 payouts" in text
    assert "**missed**" in text  # 30 flows/s is below the 50 flows/s target
    assert (tmp_path / "performance.png").stat().st_size > 10_000


def _tiny_results() -> dict:
    flow = {"request_s": 0.01, "approve_s": 0.01, "repeats": 1, "flows_timed": 1}
    cost = {"model_calls_per_payout": 4.0, "request_bytes_per_payout": 9000.0}
    return {
        "date": "2026-01-01",
        "run_seconds": 1.0,
        "machine": {"cores": 2, "cpu": "cpu", "memory_gb": 1, "os": "os", "python": "3.11",
                    "google_adk": "2.13.0", "sqlalchemy": "2", "sqlite": "3", "postgresql": "15"},
        "config": {"flows_per_repeat": 1, "warmup_flows": 1},
        "cost": {
            "ours": {**cost, "duplicate_extra_model_calls": 0, "duplicate_extra_payouts": 0},
            "seed": {**cost, "duplicate_extra_model_calls": 2, "duplicate_extra_payouts": 1},
        },
        "per_flow": [
            {"system": s, "store": st, "flow_s": 0.02 * x, "x_memory": x, **flow}
            for s in ("ours", "seed") for st, x in (("memory", 1.0), ("sqlite", 1.5))
        ],
        "breakdown": [
            {"system": "ours", "store": store, "flows": 1, "flow_s": 0.08, "session_store_s": 0.05,
             "session_store_calls": 11.0, "ledger_s": 0.02, "ledger_calls": 6.0, "rest_s": 0.01}
            for store in ("memory", "sqlite")
        ],
        "concurrency": [{"system": "ours", "store": "sqlite", "flows": 1000, "repeats": 1, "wall_s": 33.0,
                         "flows_per_s": 30.0, "cpu_ms_per_flow": 33.0, "errors": 0, "error_kinds": {},
                         "double_payouts": 0, "peak_rss_mb": 300.0}],
        "inbox": [{"store": "sqlite", "pending": 100_000, "median_s": 0.005}],
        "resume": [{"store": "sqlite", "pending": 100, "median_s": 0.05},
                   {"store": "sqlite", "pending": 100_000, "median_s": 0.05}],
        "demo": {"wall_s": 1.8, "fastest_wall_s": 1.7, "import_wall_s": 1.2, "peak_rss_mb": 130.0, "runs": 1.0},
        "notes": [],
    }
