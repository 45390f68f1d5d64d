"""One flow at a time on each store: latency, model calls, request bytes, duplicates.

All configurations are open together (this project's each on a desk of its
own, flows.py) and take turns flow by flow: each repeat (a pass) runs one flow
on every configuration in turn, a number of times, so a burst of noise on this
shared machine lands on all of them alike. A pass's figure for a
configuration is the median of its flows there; a configuration's figure is
the median of its passes, and a ratio between two configurations is taken
pass by pass (`pass_ratios`), so a busy minute cannot favour one side. After the timed repeats, one more flow per
configuration counts the model calls of its request and of its approval, then
is approved a second time (the same FunctionResponse, resent) to count what a
duplicate approval costs.
"""

from __future__ import annotations

import statistics
from typing import Any

from .flows import SYSTEMS, FlowTimes, Pending, System, open_system
from .stores import Stores


async def measure_per_flow(
    stores: Stores, *, repeats: int, flows_per_repeat: int, warmup_flows: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    systems: list[System] = []
    for name in SYSTEMS:
        for store in stores.kinds:
            systems.append(open_system(name, store, await stores.fresh(store)))
    batches: dict[int, list[tuple[float, float, float]]] = {i: [] for i in range(len(systems))}
    flows: dict[int, list[Pending]] = {i: [] for i in range(len(systems))}
    counter = 0
    try:
        for repeat in range(repeats + 1):
            size = warmup_flows if repeat == 0 else flows_per_repeat
            times: dict[int, list[FlowTimes]] = {i: [] for i in range(len(systems))}
            for _ in range(size):
                for i, system in enumerate(systems):  # one flow each in turn: a second of noise hits them all
                    counter += 1
                    pending, took = await system.flow(counter)
                    flows[i].append(pending)
                    times[i].append(took)
            if repeat:
                for i, took_each in times.items():
                    batches[i].append((
                        statistics.median(t.total_s for t in took_each),
                        statistics.median(t.request_s for t in took_each),
                        statistics.median(t.approve_s for t in took_each),
                    ))
        rows, per_system_cost = [], []
        for i, system in enumerate(systems):
            payouts = [await system.payouts(p) for p in flows[i]]
            if payouts != [1] * len(payouts):
                raise RuntimeError(f"{system.name}/{system.store}: payouts per flow {set(payouts)}, expected 1")
            calls, sent = system.meter.total_calls, system.meter.total_bytes
            counted = await _counted_flow(system, counter + 1 + i) | await _several_flow(system, counter + 1 + i)
            rows.append({
                "system": system.name,
                "store": system.store,
                "flow_s": statistics.median(b[0] for b in batches[i]),
                "request_s": statistics.median(b[1] for b in batches[i]),
                "approve_s": statistics.median(b[2] for b in batches[i]),
                # Each repeat's figure, in order: repeat k of every configuration ran in the same minute.
                "batches_s": [b[0] for b in batches[i]],
                "repeats": repeats,
                "flows_timed": repeats * flows_per_repeat,
            })
            per_system_cost.append({
                "system": system.name,
                "store": system.store,
                "flows": len(flows[i]),
                "model_calls_per_payout": calls / sum(payouts),
                "request_bytes_per_payout": sent / sum(payouts),
                **counted,
            })
    finally:
        for system in systems:
            await system.close()
    for row in rows:
        memory = next(r["flow_s"] for r in rows if r["system"] == row["system"] and r["store"] == "memory")
        row["x_memory"] = row["flow_s"] / memory
    return rows, _cost_summary(per_system_cost)


def pass_ratios(per_flow: list[dict[str, Any]], store: str) -> list[float]:
    """Ours / the seed's on `store`, once per repeat: both measured in the same minute of the run."""
    by = {(r["system"], r["store"]): r for r in per_flow}
    ours, seed = by.get(("ours", store)), by.get(("seed", store))
    if ours is None or seed is None:
        return []
    return [mine / theirs for mine, theirs in zip(ours["batches_s"], seed["batches_s"], strict=True)]


async def _counted_flow(system: System, n: int) -> dict[str, int]:
    """One flow, phase by phase: model calls of the request and the approval, then a duplicate's cost."""
    pending = await system.request(f"employee-{n}")
    asked = system.meter.calls[pending.session_id]
    await system.approve(pending)
    calls, payouts = system.meter.calls[pending.session_id], await system.payouts(pending)
    events = await system.duplicate(pending)
    return {
        "request_model_calls": asked,
        "approval_model_calls": calls - asked,
        "duplicate_extra_model_calls": system.meter.calls[pending.session_id] - calls,
        "duplicate_extra_payouts": await system.payouts(pending) - payouts,
        # What the client gets back for the duplicate: events, and how many carry text.
        "duplicate_events": len(events),
        "duplicate_replies": sum(1 for e in events if e.content and any(p.text for p in e.content.parts or [])),
    }


async def _several_flow(system: System, n: int) -> dict[str, Any]:
    """Two expenses in one message, approved one after the other: their cost, and any extra payout."""
    pending = await system.request_several(f"several-{n}")
    if len(pending) != 2:
        raise RuntimeError(f"{system.name}: {len(pending)} pending calls for two expenses, expected 2")
    for each in pending:
        await system.approve(each)
    session_id = pending[0].session_id
    payouts = await system.payouts(pending[0])
    return {
        "several_model_calls_per_payout": system.meter.calls[session_id] / 2,
        "several_request_bytes_per_payout": system.meter.bytes[session_id] / 2,
        "several_extra_payouts": payouts - 2,
    }


def _cost_summary(per_store: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {"per_store": per_store}
    for name in SYSTEMS:
        rows = [r for r in per_store if r["system"] == name]
        summary[name] = {
            "model_calls_per_payout": max(r["model_calls_per_payout"] for r in rows),
            "request_bytes_per_payout": statistics.median(r["request_bytes_per_payout"] for r in rows),
            **{key: max(r[key] for r in rows) for key in (
                "request_model_calls", "approval_model_calls", "duplicate_extra_model_calls",
                "duplicate_extra_payouts", "duplicate_events", "duplicate_replies",
                "several_model_calls_per_payout", "several_request_bytes_per_payout", "several_extra_payouts",
            )},
        }
    return summary
