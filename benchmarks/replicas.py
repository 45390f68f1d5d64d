"""Throughput per replica: completed flows per second with 1 and 2 servers on one PostgreSQL database.

Each replica is the real server, `python -m long_running_agent.web`, in its own
process on 127.0.0.1, and all of them use one PostgreSQL database, whose
schema (the ledger's tables and ADK's session tables) is created once before
they start. A load generator in this process drives whole flows over HTTP, as
clients do: create a session (POST /apps/.../sessions), send the request
(POST /run, which opens a ticket), approve the ticket (POST
/api/approvals/{id}/approve, which resumes the conversation and pays). A flow
counts as completed when the approval answers "delivered" with one payout;
afterwards the database is asked for any conversation paid twice.

Why servers over HTTP, not in-process children like concurrency.py: a replica
is a server, so its throughput includes uvicorn, ADK's /run, the gate and
the approvals API; and with two replicas each approval goes to the *other*
replica than the one that opened the ticket, as a load balancer may send it,
so every decision is delivered across processes through the shared database
(the conversation locks, the ledger, ADK's session rows). The price is a load
generator on the same two cores; its CPU time is measured and reported.

Both replicas stay up for the whole measurement; a 1-replica run sends its
load to the first one only (the second idles: one indexed query every 30 s).
Runs alternate, 1 then 2 replicas, repeat after repeat, so noise and the
database's growth land on both alike. Each replica is kept at `in_flight` flows
at once.
"""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from long_running_agent.desk import Desk
from long_running_agent.ledger import Ledger
from long_running_agent.names import APP_NAME

from .environment import ROOT, child_env, pinned
from .stores import Stores

APPROVER, TOKEN = "bob", "bench-approver-token"
REQUEST = "Please reimburse $250.00 for the team offsite lunch."


@dataclass
class Replica:
    process: subprocess.Popen[bytes]
    base_url: str
    log: Path


async def prepare_schema(url: str) -> None:
    """Create the ledger's and ADK's tables once, before any replica starts (as a server does at start)."""
    desk = Desk(pinned(database_url=url))
    try:
        await desk.prepare()
    finally:
        await desk.close()


@contextmanager
def replicas(count: int, url: str, root: Path) -> Iterator[list[Replica]]:
    """Start `count` servers on `url`, each on a free loopback port; stop them at the end."""
    home = root / "home"
    (home / ".adk").mkdir(parents=True, exist_ok=True)
    # Answers the dev UI's telemetry question, as a user would once.
    (home / ".adk" / "config.json").write_text(json.dumps({"telemetry": False}))
    env = child_env(EXPENSES_DATABASE_URL=url, APPROVERS=f"{APPROVER}:{TOKEN},carol:bench-second-approver",
                    HOME=str(home), PYTHONUNBUFFERED="1")
    with ExitStack() as stack:
        started = []
        for n in range(count):
            port = _free_port()
            log = root / f"replica-{n}.log"
            with log.open("w") as out:
                process = subprocess.Popen(
                    [sys.executable, "-m", "long_running_agent.web", "--port", str(port)],
                    cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                )
            stack.callback(_stop, process)
            started.append(Replica(process, f"http://127.0.0.1:{port}", log))
        for replica in started:
            _wait_until_healthy(replica)
        yield started


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_healthy(replica: Replica, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if replica.process.poll() is not None:
            raise RuntimeError(f"a replica exited at start:\n{replica.log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{replica.base_url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"a replica did not answer /health in {timeout:.0f} s:\n{replica.log.read_text()[-3000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _ticket_of(events: list[dict[str, Any]]) -> str | None:
    for event in events:
        for part in (event.get("content") or {}).get("parts", []):
            response = part.get("functionResponse") or {}
            if response.get("name") == "ask_for_approval":
                ticket = (response.get("response") or {}).get("ticket_id")
                if ticket:
                    return str(ticket)
    return None


async def one_flow(asker: httpx.AsyncClient, approver: httpx.AsyncClient, user: str) -> str | None:
    """One request on `asker`, its approval on `approver`; None when it completed, else what went wrong."""
    created = await asker.post(f"/apps/{APP_NAME}/users/{user}/sessions", json={})
    if created.status_code != 200:
        return f"create session: HTTP {created.status_code}"
    session_id = created.json()["id"]
    ran = await asker.post("/run", json={
        "appName": APP_NAME, "userId": user, "sessionId": session_id,
        "newMessage": {"role": "user", "parts": [{"text": REQUEST}]},
    })
    if ran.status_code != 200:
        return f"/run: HTTP {ran.status_code}"
    ticket = _ticket_of(ran.json())
    if ticket is None:
        return "/run: no ticket opened"
    approved = await approver.post(f"/api/approvals/{ticket}/approve",
                                   headers={"Authorization": f"Bearer {TOKEN}"})
    if approved.status_code != 200:
        return f"approve: HTTP {approved.status_code} {approved.json().get('error', '')}"
    body = approved.json()
    if body.get("delivery") != "delivered" or len(body.get("payouts", [])) != 1:
        return f"approve: {body.get('delivery')}, {len(body.get('payouts', []))} payouts"
    return None


async def drive(
    clients: list[httpx.AsyncClient], *, flows: int, in_flight: int, tag: str
) -> dict[str, Any]:
    """Run `flows` flows over `clients`, `in_flight` per client at once; flow n asks replica n and
    is approved by the next one (the same one when there is only one)."""
    gate = asyncio.Semaphore(in_flight * len(clients))
    errors: Counter[str] = Counter()
    took: list[float] = []
    crossed = 0

    async def flow(n: int) -> None:
        nonlocal crossed
        asker, approver = n % len(clients), (n + 1) % len(clients)
        async with gate:
            started = time.perf_counter()
            try:
                failed = await one_flow(clients[asker], clients[approver], f"{tag}-{n}")
            except httpx.HTTPError as error:
                failed = f"{type(error).__name__}: {error}"[:160]
            if failed:
                errors[failed] += 1
            else:
                took.append(time.perf_counter() - started)
                crossed += asker != approver

    started = time.perf_counter()
    await asyncio.gather(*(flow(n) for n in range(flows)))
    wall = time.perf_counter() - started
    return {"wall_s": wall, "completed": len(took), "approved_on_the_other_replica": crossed,
            "errors": sum(errors.values()),
            "error_kinds": dict(errors.most_common(3)),
            "flow_p50_s": statistics.median(took) if took else None}


async def double_payouts(url: str) -> int:
    """Payouts beyond the first in any one conversation (the UNIQUE constraints should make it 0)."""
    ledger = Ledger(url)
    try:
        async with ledger.engine.connect() as conn:
            extra = await conn.scalar(text(
                "SELECT COALESCE(SUM(n - 1), 0) FROM "
                "(SELECT COUNT(*) AS n FROM approval_payouts GROUP BY session_id) AS per_session WHERE n > 1"
            ))
        return int(extra or 0)
    finally:
        await ledger.close()


async def _measure(
    servers: list[Replica], plan: list[int], *, flows_per_replica: int, in_flight: int, warmup_flows: int,
) -> list[dict[str, Any]]:
    limits = httpx.Limits(max_connections=in_flight * 2, max_keepalive_connections=in_flight * 2)
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(httpx.AsyncClient(base_url=s.base_url, timeout=300,
                                                                     limits=limits)) for s in servers]
        # Warm-up: each replica's first requests (imports, prepared statements, pools).
        await drive(clients, flows=warmup_flows * len(clients), in_flight=1, tag="warmup")
        runs = []
        for n, count in enumerate(plan):
            result = await drive(clients[:count], flows=flows_per_replica * count, in_flight=in_flight,
                                 tag=f"run{n}-r{count}")
            runs.append({"replicas": count, "flows": flows_per_replica * count, **result,
                         "flows_per_s": result["completed"] / result["wall_s"]})
        return runs


def measure_replicas(
    stores: Stores, *, flows_per_replica: int, in_flight: int, repeats: int, warmup_flows: int,
) -> dict[str, Any]:
    """Flows/s for 1 and 2 replicas (medians over `repeats`), and every run."""
    if not stores.has("postgres"):
        return {}
    url = asyncio.run(stores.fresh("postgres"))
    assert url is not None
    asyncio.run(prepare_schema(url))
    root = stores.root / "replicas"
    root.mkdir(exist_ok=True)
    with replicas(2, url, root) as servers:
        runs = asyncio.run(_measure(
            servers, [1, 2] * repeats, flows_per_replica=flows_per_replica, in_flight=in_flight,
            warmup_flows=warmup_flows,
        ))
    summary: dict[str, Any] = {"runs": runs, "in_flight_per_replica": in_flight,
                               "flows_per_replica": flows_per_replica, "repeats": repeats,
                               "double_payouts": asyncio.run(double_payouts(url)), "by_replicas": []}
    for count in (1, 2):
        mine = [r for r in runs if r["replicas"] == count]
        summary["by_replicas"].append({
            "replicas": count,
            "flows_per_s": statistics.median(r["flows_per_s"] for r in mine),
            "errors": max(r["errors"] for r in mine),
            "error_kinds": max(mine, key=lambda r: r["errors"])["error_kinds"],
            "wall_s": statistics.median(r["wall_s"] for r in mine),
            "flow_p50_s": statistics.median(r["flow_p50_s"] or 0.0 for r in mine),
        })
    one, two = summary["by_replicas"]
    summary["ratio"] = two["flows_per_s"] / one["flows_per_s"] if one["flows_per_s"] else 0.0
    return summary
