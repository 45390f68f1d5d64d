"""`python main.py`, the whole demo, cold: a new process in an empty directory.

Each run starts the interpreter, imports ADK and the app, creates the SQLite
store under ./.data, runs the approval flow and the small payout, and exits.
Wall time is measured around the process; peak RSS is the child's own
(`os.wait4` rusage), so nothing of the benchmark process is counted. To show
where the time goes, the same number of runs only import `main` and exit, only
`import google.adk` (the yardstick the ratio is taken to), and only import what
the seed's bare pattern imports from ADK (its runner, agent, tools and session
services).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .environment import child_env

MAIN = Path(__file__).resolve().parent.parent / "main.py"


def _run_cold(args: list[str], *, expect: bytes) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one child process in an empty directory."""
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as empty:
        env = child_env() | {"EXPENSES_DATABASE_URL": f"sqlite+aiosqlite:///{empty}/expenses.db"}
        started = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, *args], cwd=empty, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        assert child.stdout is not None
        output = child.stdout.read()
        _pid, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0 or expect not in output:
            raise RuntimeError(f"{' '.join(args)} failed ({child.returncode}):\n{output.decode()[-2000:]}")
        return wall, usage.ru_maxrss / 1024  # KiB on Linux


# What the seed's pattern imports from ADK to run its agent (benchmarks/baseline.py).
SEED_IMPORTS = ("from google.adk.agents import LlmAgent; from google.adk.apps import App; "
                "from google.adk.runners import Runner; from google.adk.tools import LongRunningFunctionTool; "
                "from google.adk.sessions import DatabaseSessionService")


def measure_demo(repeats: int) -> dict[str, float]:
    runs, imports, adk, seed = [], [], [], []
    for _ in range(repeats):
        runs.append(_run_cold([str(MAIN)], expect=b"The flow completed."))
        imports.append(_run_cold(
            ["-c", f"import sys; sys.path.insert(0, {str(MAIN.parent)!r}); import main; print('imported')"],
            expect=b"imported",
        ))
        adk.append(_run_cold(["-c", "import google.adk; print('imported')"], expect=b"imported"))
        seed.append(_run_cold(["-c", f"{SEED_IMPORTS}; print('imported')"], expect=b"imported"))
    wall = statistics.median(wall for wall, _rss in runs)
    adk_wall = statistics.median(wall for wall, _rss in adk)
    return {
        "wall_s": wall,
        "fastest_wall_s": min(wall for wall, _rss in runs),
        "peak_rss_mb": statistics.median(rss for _wall, rss in runs),
        "import_wall_s": statistics.median(wall for wall, _rss in imports),
        "adk_import_wall_s": adk_wall,
        "seed_imports_wall_s": statistics.median(wall for wall, _rss in seed),
        "x_adk_import": wall / adk_wall,
        "runs": float(repeats),
    }
