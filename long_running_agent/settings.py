"""Settings, read from the environment once per process; each one is documented in `.env.example`.

This is the only module that reads the environment. `settings()` loads it on
first use and keeps it; tests and benchmarks hand over their own with
`use_settings(...)` instead of editing `os.environ`. A value the app cannot
use fails here, at start, with a message naming the variable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
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
    trusted_user_header: str | None
    production: bool
    daily_auto_approval_limit: Decimal
    auto_migrate: bool = True
    # Above this, two approvals from two approvers (DUAL_APPROVAL_ABOVE).
    dual_approval_above: Decimal = Decimal("5000")
    # Notifications (docs/notifications.md): a webhook, reminders, escalation.
    webhook_url: str | None = None
    webhook_secret: str | None = None
    # One webhook attempt, start to end (APPROVAL_WEBHOOK_TIMEOUT_SECONDS); also
    # how long an approver command waits for its notifications.
    webhook_timeout: timedelta = timedelta(seconds=5)
    remind_before: timedelta | None = timedelta(hours=24)
    escalate_to: tuple[str, ...] = ()
    model: ModelSettings = field(default_factory=lambda: ModelSettings(None, None))


def _decimal(name: str, default: str, *, low: str, high: str) -> Decimal:
    """A number from the environment, within (low, high]; low is exclusive."""
    raw = os.getenv(name, default)
    try:
        value = Decimal(raw.strip())
    except InvalidOperation:
        raise SettingsError(f"{name}={raw!r} is not a number; set it to e.g. {default}.") from None
    if not value.is_finite() or not Decimal(low) < value <= Decimal(high):
        raise SettingsError(
            f"{name}={raw!r} is out of range: it must be more than {low} and at most {high}, e.g. {default}."
        )
    return value


def _flag(name: str) -> bool:
    raw = os.getenv(name, "").strip().lower()
    if raw not in {"", "0", "1", "true", "false", "yes", "no"}:
        raise SettingsError(f"{name}={raw!r} must be true or false.")
    return raw in {"1", "true", "yes"}


MIN_TOKEN = 8


def _dollars_or_zero(name: str, default: str, *, high: str) -> Decimal:
    """Dollars and cents, where 0 is allowed (for a limit, it means "none at all")."""
    raw = os.getenv(name, default)
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise SettingsError(f"{name}={raw!r} is not a number; set it to e.g. {default}, or 0.") from None
    if (not value.is_finite() or not 0 <= value <= Decimal(high)
            or int(value.normalize().as_tuple().exponent) < -2):
        raise SettingsError(
            f"{name}={raw!r} must be 0 or a number of dollars and cents up to {high}, e.g. {default}."
        )
    return value


def _approvers(raw: str) -> dict[str, str]:
    """Parse `name:token,name:token` into {token: name}, names in their canonical form."""
    from .ledger.inputs import InputError, name

    approvers: dict[str, str] = {}
    for entry in filter(None, (item.strip() for item in raw.split(","))):
        who, sep, token = entry.partition(":")
        token = token.strip()
        if not sep or not who.strip() or not token:
            raise SettingsError(
                f"APPROVERS entry {entry!r} must look like name:token (e.g. bob:s3cret-t0ken)."
            )
        try:
            canonical = name(who, "approver name")
        except InputError as error:
            raise SettingsError(f"APPROVERS: {error}") from None
        if len(token) < MIN_TOKEN:
            raise SettingsError(
                f"APPROVERS: the token of {canonical} is too short; use {MIN_TOKEN} or more characters."
            )
        if token in approvers:
            raise SettingsError(
                f"APPROVERS: {approvers[token]} and {canonical} have the same token; give each their own."
            )
        approvers[token] = canonical
    return approvers


@dataclass(frozen=True)
class ModelSettings:
    """Which model runs (see model/choice.py): AGENT_MODEL, and the Gemini credentials, without secrets."""

    agent_model: str | None
    gemini_credentials: str | None


def model_settings() -> ModelSettings:
    """Only what picks the model; it cannot fail, so the agent module always imports."""
    return ModelSettings(os.getenv("AGENT_MODEL", "").strip() or None, _gemini_credentials())


def _gemini_credentials() -> str | None:
    """A description of the configured Gemini credentials (never the key itself), or None."""
    vertex = any(os.getenv(name, "").strip().lower() in {"1", "true", "yes"}
                 for name in ("GOOGLE_GENAI_USE_ENTERPRISE", "GOOGLE_GENAI_USE_VERTEXAI"))
    if vertex:
        project = os.getenv("GOOGLE_CLOUD_PROJECT")
        return f"Vertex AI project {project}" if project else None
    if os.getenv("GOOGLE_API_KEY") or os.getenv("GEMINI_API_KEY"):
        return "GOOGLE_API_KEY"
    return None


_current: Settings | None = None


def settings() -> Settings:
    """This process's settings: read from the environment on first use, then kept."""
    global _current
    if _current is None:
        _current = load_settings()
    return _current


def use_settings(new: Settings | None) -> None:
    """Run with `new` from now on (tests, benchmarks); None reads the environment again on next use."""
    global _current
    _current = new


MIN_SECRET = 16


def _webhook() -> tuple[str | None, str | None]:
    url = os.getenv("APPROVAL_WEBHOOK_URL", "").strip() or None
    secret = os.getenv("APPROVAL_WEBHOOK_SECRET", "").strip() or None
    if url is None:
        return None, secret
    if not url.lower().startswith(("https://", "http://")) or " " in url:
        raise SettingsError(f"APPROVAL_WEBHOOK_URL={url!r} must be an http(s) URL, e.g. "
                            "https://hooks.slack.com/services/... or http://127.0.0.1:9000/hook.")
    if secret is None or len(secret) < MIN_SECRET:
        raise SettingsError(
            f"APPROVAL_WEBHOOK_URL is set, so APPROVAL_WEBHOOK_SECRET needs a value of {MIN_SECRET} characters "
            "or more: every webhook is signed with it (a receiver checks X-Signature-256; Slack ignores it). "
            "One way: python -c 'import secrets; print(secrets.token_hex(32))'"
        )
    return url, secret


def _names(variable: str) -> tuple[str, ...]:
    from .ledger.inputs import InputError, name

    try:
        return tuple(dict.fromkeys(name(n, "name") for n in os.getenv(variable, "").split(",") if n.strip()))
    except InputError as error:
        raise SettingsError(f"{variable}: {error}") from None


def _remind_before(ttl: timedelta) -> timedelta | None:
    raw = os.getenv("APPROVAL_REMIND_BEFORE_HOURS", "24")
    try:
        hours = Decimal(raw.strip())
    except InvalidOperation:
        raise SettingsError(f"APPROVAL_REMIND_BEFORE_HOURS={raw!r} is not a number; e.g. 24, or 0 for none.") \
            from None
    if not hours.is_finite() or hours < 0:
        raise SettingsError(f"APPROVAL_REMIND_BEFORE_HOURS={raw!r} must be 0 (no reminders) or more, e.g. 24.")
    if hours == 0:
        return None
    if timedelta(hours=float(hours)) >= ttl:
        raise SettingsError(
            f"APPROVAL_REMIND_BEFORE_HOURS={raw} must be less than APPROVAL_TTL_HOURS "
            f"({ttl.total_seconds() / 3600:g}): a reminder goes out before the ticket expires."
        )
    return timedelta(hours=float(hours))


def load_settings() -> Settings:
    """Read and check every setting from the environment."""
    max_amount = _decimal("MAX_REIMBURSEMENT", "1000000", low="0", high="1000000000")
    threshold = _decimal("APPROVAL_THRESHOLD", "100", low="0", high=str(max_amount))
    header = os.getenv("TRUSTED_USER_HEADER", "").strip() or None
    production = _flag("PRODUCTION_MODE")
    if production and header is None:
        raise SettingsError(
            "PRODUCTION_MODE=true needs TRUSTED_USER_HEADER, the header your authenticating proxy sets "
            "(e.g. X-Forwarded-User for oauth2-proxy), so requesters cannot pick their own user id."
        )
    ttl = timedelta(hours=float(_decimal("APPROVAL_TTL_HOURS", "72", low="0", high="8760")))
    webhook_url, webhook_secret = _webhook()
    approvers = _approvers(os.getenv("APPROVERS", ""))
    dual = _decimal("DUAL_APPROVAL_ABOVE", "5000", low="0", high="1000000000")
    if dual < threshold:
        raise SettingsError(
            f"DUAL_APPROVAL_ABOVE={dual} is below APPROVAL_THRESHOLD={threshold}: amounts in between would be "
            f"paid with no approval at all. Set DUAL_APPROVAL_ABOVE to {threshold} or more."
        )
    if len(approvers) == 1:
        [only] = approvers.values()
        raise SettingsError(
            f"APPROVERS names one approver ({only}), but requests above DUAL_APPROVAL_ABOVE (${dual:,}), alone "
            "or added up, need two different approvers. Add a second name:token to APPROVERS."
        )
    escalate_to = _names("ESCALATE_TO")
    unknown = [n for n in escalate_to if approvers and n not in approvers.values()]
    if unknown:
        raise SettingsError(f"ESCALATE_TO names {', '.join(unknown)}, who is not in APPROVERS; escalate to "
                            f"approvers who can decide: {', '.join(sorted(approvers.values()))}.")
    return Settings(
        model=model_settings(),
        database_url=os.getenv("EXPENSES_DATABASE_URL") or DEFAULT_DATABASE_URL,
        approval_threshold=threshold,
        max_amount=max_amount,
        approval_ttl=ttl,
        dev_chat_approval=_flag("DEV_CHAT_APPROVAL"),
        approvers=approvers,
        sweep_interval=timedelta(seconds=float(_decimal("EXPIRY_SWEEP_SECONDS", "30", low="0", high="3600"))),
        trusted_user_header=header,
        production=production,
        daily_auto_approval_limit=_dollars_or_zero("DAILY_AUTO_APPROVAL_LIMIT", "250", high="10000000"),
        auto_migrate=os.getenv("AUTO_MIGRATE", "").strip() == "" or _flag("AUTO_MIGRATE"),
        dual_approval_above=dual,
        webhook_url=webhook_url,
        webhook_secret=webhook_secret,
        webhook_timeout=timedelta(seconds=float(_decimal("APPROVAL_WEBHOOK_TIMEOUT_SECONDS", "5", low="0", high="30"))),
        remind_before=_remind_before(ttl),
        escalate_to=escalate_to,
    )
