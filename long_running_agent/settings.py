"""Settings read from the environment, each one documented in `.env.example`.

Read at call time rather than at import, so tests and the CLI can change them
per run, and so importing the agent never touches a database or the network.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path

# The project folder (the one holding this package), so that `python main.py`,
# `make web` and plain `adk web` started from anywhere share one ledger.
PROJECT_DIR = Path(__file__).resolve().parent.parent
DEFAULT_DATABASE_URL = f"sqlite+aiosqlite:///{PROJECT_DIR / '.data' / 'expenses.db'}"


class SettingsError(ValueError):
    """A setting in the environment has a value the app cannot use."""


@dataclass(frozen=True)
class Settings:
    database_url: str
    approval_threshold: Decimal
    max_amount: Decimal
    approval_ttl: timedelta
    dev_chat_approval: bool
    approvers: dict[str, str]
    sweep_interval: timedelta
    daily_auto_approval_limit: Decimal


def _decimal(name: str, default: str) -> Decimal:
    raw = os.getenv(name, default)
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise SettingsError(f"{name}={raw!r} is not a number; set it to e.g. {default}.") from None
    if not value.is_finite() or value <= 0:
        raise SettingsError(f"{name}={raw!r} must be a positive number, e.g. {default}.")
    return value


def _dollars_or_zero(name: str, default: str) -> Decimal:
    """Dollars and cents, where 0 is allowed (for a limit, it means "none at all")."""
    raw = os.getenv(name, default)
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise SettingsError(f"{name}={raw!r} is not a number; set it to e.g. {default}, or 0.") from None
    if not value.is_finite() or value < 0 or int(value.normalize().as_tuple().exponent) < -2:
        raise SettingsError(
            f"{name}={raw!r} must be 0 or a positive number of dollars and cents, e.g. {default}."
        )
    return value


def _approvers(raw: str) -> dict[str, str]:
    """Parse `name:token,name:token` into {token: name}."""
    approvers: dict[str, str] = {}
    for entry in filter(None, (item.strip() for item in raw.split(","))):
        name, sep, token = entry.partition(":")
        if not sep or not name.strip() or not token.strip():
            raise SettingsError(
                f"APPROVERS entry {entry!r} must look like name:token (e.g. bob:s3cret)."
            )
        approvers[token.strip()] = name.strip()
    return approvers


def load_settings() -> Settings:
    hours = _decimal("APPROVAL_TTL_HOURS", "72")
    return Settings(
        database_url=os.getenv("EXPENSES_DATABASE_URL") or DEFAULT_DATABASE_URL,
        approval_threshold=_decimal("APPROVAL_THRESHOLD", "100"),
        max_amount=_decimal("MAX_REIMBURSEMENT", "1000000"),
        approval_ttl=timedelta(hours=float(hours)),
        dev_chat_approval=os.getenv("DEV_CHAT_APPROVAL", "").lower() in {"1", "true", "yes"},
        approvers=_approvers(os.getenv("APPROVERS", "")),
        sweep_interval=timedelta(seconds=float(_decimal("EXPIRY_SWEEP_SECONDS", "30"))),
        daily_auto_approval_limit=_dollars_or_zero("DAILY_AUTO_APPROVAL_LIMIT", "250"),
    )
