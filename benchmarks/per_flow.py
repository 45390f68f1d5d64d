"""One flow at a time on each store: latency, model calls, request bytes, duplicates.

Timed, on every store: this project and the seed's pattern, both on the
session service this project uses there, so that ours / seed measures this
project; and the seed's pattern on ADK's SqliteSessionService on a SQLite
file, for information (baseline.py). All are open together (this project's
each on a desk of its own, flows.py) and take turns flow by flow: each repeat
(a pass) runs one flow on every configuration in turn, a number of times, so
a burst of noise on this shared machine lands on all of them alike. A pass's
figure for a configuration is the median of its flows there; a ratio between
two configurations is taken pass by pass (`pass_ratios`), and reported as its
median and range over the passes.

Then one more flow per configuration, and per store for ADK's tool
confirmation, counts the model calls and request bytes of its request and of
its approval, then is approved a second time (the same FunctionResponse,
resent) to count what a duplicate approval costs; and one message naming two
expenses counts what two approvals from one model turn cost.
"""

from __future__ import annotations

import statistics
from typing import Any

from .baseline import SESSION_SERVICES, SQLITE_SERVICE
from .flows import CONFIRMATION, OURS, SEED, SYSTEMS, FlowTimes, Pending, System, open_system
from .stores import SQLITE, Stores


def configurations(stores: Stores) -> list[tuple[str, str, str]]:
    """(system, store, session service) of each timed configuration."""
    return [(name, store, SESSION_SERVICES[store]) for name in (OURS, SEED) for store in stores.kinds] + [
        (SEED, SQLITE, SQLITE_SERVICE)]


async def measure_per_flow(
    stores: Stores, *, repeats: int, flows_per_repeat: int, warmup_flows: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    systems = [open_system(name, store, await stores.fresh(store), service=service)
               for name, store, service in configurations(stores)]
    systems += [open_system(CONFIRMATION, store, await stores.fresh(store)) for store in stores.kinds]
    timed = [s for s in systems if s.name != CONFIRMATION]
    passes: dict[int, list[float]] = {i: [] for i in range(len(timed))}
    flows: dict[int, list[Pending]] = {i: [] for i in range(len(timed))}
    counter = 0
    try:
        for repeat in range(repeats + 1):
            size = warmup_flows if repeat == 0 else flows_per_repeat
            times: dict[int, list[FlowTimes]] = {i: [] for i in range(len(timed))}
            for _ in range(size):
                for i, system in enumerate(timed):  # one flow each in turn: a second of noise hits them all
                    counter += 1
                    pending, took = await system.flow(counter)
                    flows[i].append(pending)
                    times[i].append(took)
            if repeat:
                for i, took_each in times.items():
                    passes[i].append(statistics.median(t.total_s for t in took_each))
        rows = []
        for i, system in enumerate(timed):
            payouts = [await system.payouts(p) for p in flows[i]]
            if payouts != [1] * len(payouts):
                raise RuntimeError(f"{system.name}/{system.store}: payouts per flow {set(payouts)}, expected 1")
            rows.append({
                "system": system.name, "store": system.store, "service": system.service,
                "flow_s": statistics.median(passes[i]),
                # Each pass's figure, in order: pass k of every configuration ran in the same minute.
                "batches_s": passes[i], "repeats": repeats, "flows_timed": repeats * flows_per_repeat,
            })
        counted = []
        for n, system in enumerate(systems, start=counter + 1):
            counted.append({"system": system.name, **await _counted_flow(system, n), **await _several_flow(system, n)})
    finally:
        for system in systems:
            await system.close()
    return rows, _cost_summary(counted)


def pass_ratios(per_flow: list[dict[str, Any]], store: str, seed_service: str | None = None) -> list[float]:
    """Ours / the seed's on `store`, once per pass: both measured in the same minute of the run.

    The seed on `seed_service`, by default on the session service this project uses on `store`.
    """
    by = {(r["system"], r["store"], r["service"]): r for r in per_flow}
    ours = by.get((OURS, store, SESSION_SERVICES[store]))
    seed = by.get((SEED, store, seed_service or SESSION_SERVICES[store]))
    if ours is None or seed is None:
        return []
    return [mine / theirs for mine, theirs in zip(ours["batches_s"], seed["batches_s"], strict=True)]


async def _counted_flow(system: System, n: int) -> dict[str, int]:
    """One flow, phase by phase: model calls of the request and the approval, then a duplicate's cost."""
    pending = await system.request(f"employee-{n}")
    asked = system.meter.calls[pending.session_id]
    await system.approve(pending)
    calls, payouts = system.meter.calls[pending.session_id], await system.payouts(pending)
    if payouts != 1:
        raise RuntimeError(f"{system.name}/{system.store}: {payouts} payouts for one approved flow, expected 1")
    sent = system.meter.bytes[pending.session_id]
    events = await system.duplicate(pending)
    return {
        "model_calls_per_payout": calls,
        "request_bytes_per_payout": sent,
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


def _cost_summary(counted: list[dict[str, Any]]) -> dict[str, Any]:
    """Per system, the largest of each count over its configurations."""
    return {name: {key: max(r[key] for r in counted if r["system"] == name)
                   for key in counted[0] if key != "system"} for name in SYSTEMS}
