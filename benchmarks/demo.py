"""`python main.py`, the whole demo, cold: a new process in an empty directory.

Each run starts the interpreter, imports ADK and the app, creates the SQLite
store under ./.data, runs the approval flow and the small payout, and exits.
Wall time is measured around the process, and to the line that shows the
first model call's answer; peak RSS is the child's own (`os.wait4` rusage), so
nothing of the benchmark process is counted. Beside each run, in turn, the
seed's pattern runs cold to its first model call (seed_cold.py), on the
session service `python main.py` uses: the yardstick the start-up ratio is
taken to, pair by pair.

"Cold" is a new interpreter and a new database, with the bytecode Python
writes on a first run already written, as after any first run on a user's
machine: the children keep it under a cache folder of their own
(PYTHONPYCACHEPREFIX), filled by one untimed run of each command.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .environment import child_env

MAIN = Path(__file__).resolve().parent.parent / "main.py"
SEED_COLD = Path(__file__).resolve().parent / "seed_cold.py"
# The line each prints once its first model call has answered.
MAIN_FIRST_CALL, SEED_FIRST_CALL = b"calls ask_for_approval", b"first model call"


def _run_cold(args: list[str], *, expect: bytes, cache: str, first: bytes | None = None) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MB, seconds to the line holding `first`) of one child in an empty directory."""
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as empty:
        env = {k: v for k, v in child_env().items() if k != "PYTHONDONTWRITEBYTECODE"} | {
            "EXPENSES_DATABASE_URL": f"sqlite+aiosqlite:///{empty}/expenses.db", "PYTHONPYCACHEPREFIX": cache}
        started = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, *(a.replace("{dir}", empty) for a in args)], cwd=empty, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        assert child.stdout is not None
        output, seen = b"", 0.0
        for line in child.stdout:
            if first is not None and not seen and first in line:
                seen = time.perf_counter() - started
            output += line
        _pid, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0 or expect not in output or (first is not None and not seen):
            raise RuntimeError(f"{' '.join(args)} failed ({child.returncode}):\n{output.decode()[-2000:]}")
        return wall, usage.ru_maxrss / 1024, seen  # KiB on Linux


def measure_demo(repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-pycache-") as cache:
        commands: dict[str, tuple[list[str], bytes, bytes | None]] = {
            "main": ([str(MAIN)], b"The flow completed.", MAIN_FIRST_CALL),
            "seed": ([str(SEED_COLD), "{dir}/seed.db"], SEED_FIRST_CALL, SEED_FIRST_CALL),
        }
        for args, expect, first in commands.values():  # writes the bytecode: a first run, untimed
            _run_cold(args, expect=expect, cache=cache, first=first)
        runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in commands}
        for _ in range(repeats):
            for name, (args, expect, first) in commands.items():
                runs[name].append(_run_cold(args, expect=expect, cache=cache, first=first))
    # Each main run over the seed's run just after it: the pair ran in the same few seconds.
    ratios = [mine[2] / seed[2] for mine, seed in zip(runs["main"], runs["seed"], strict=True)]
    return {
        "wall_s": statistics.median(run[0] for run in runs["main"]),
        "fastest_wall_s": min(run[0] for run in runs["main"]),
        "peak_rss_mb": statistics.median(run[1] for run in runs["main"]),
        "first_call_s": statistics.median(run[2] for run in runs["main"]),
        "seed_first_call_s": statistics.median(run[2] for run in runs["seed"]),
        "x_seed_first_call": ratios,
        "runs": float(repeats),
    }
