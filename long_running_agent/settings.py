"""Settings, read from the environment once per process; each one is documented in `.env.example`.

Each entry point reads them once (`load_settings()`) and builds its desk from them (desk.py), which reads the
approval policy they name. A value the app cannot use fails here, at start: a `SettingsError` names the variable and
what to set it to.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, HttpUrl, TypeAdapter, ValidationError, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .ledger.inputs import InputError, name
from .ledger.need import EVERYONE
from .ledger.policy.rules import Approver
from .ledger.storage.engine import DEFAULT_DATABASE_URL, usable_url
from .names import PYTHON
from .refusals.startup import SettingsError

MIN_SECRET = 16
MIN_TOKEN = 8
GEMINI_ADDRESS = "https://generativelanguage.googleapis.com"


@dataclass(frozen=True)
class ModelSettings:
    """Which model runs (model/choice.py): AGENT_MODEL, and the Gemini credentials, without secrets."""

    agent_model: str | None
    gemini_credentials: str | None
    gemini_address: str = GEMINI_ADDRESS  # where google-genai calls, named when it does not answer


def model_settings() -> ModelSettings:
    """Only what picks the model; it cannot fail, so the agent module always imports."""
    return ModelSettings(os.getenv("AGENT_MODEL", "").strip() or None, _gemini_credentials(), _gemini_address())


def _gemini_credentials() -> str | None:
    """A description of the configured Gemini credentials (never the key itself), or None."""
    if _uses_vertex():
        project = os.getenv("GOOGLE_CLOUD_PROJECT")
        return f"Vertex AI project {project}" if project else None
    if os.getenv("GOOGLE_API_KEY") or os.getenv("GEMINI_API_KEY"):
        return "GOOGLE_API_KEY"
    return None


def _gemini_address() -> str:
    """The address google-genai calls: GOOGLE_GEMINI_BASE_URL, or on Vertex AI its own, else Google's."""
    if _uses_vertex():
        location = os.getenv("GOOGLE_CLOUD_LOCATION", "").strip() or "global"
        default = ("https://aiplatform.googleapis.com" if location == "global"
                   else f"https://{location}-aiplatform.googleapis.com")
        return (os.getenv("GOOGLE_VERTEX_BASE_URL", "").strip() or default).rstrip("/")
    return (os.getenv("GOOGLE_GEMINI_BASE_URL", "").strip() or GEMINI_ADDRESS).rstrip("/")


def _uses_vertex() -> bool:
    return any(os.getenv(name, "").strip().lower() in {"1", "true", "yes"}
               for name in ("GOOGLE_GENAI_USE_ENTERPRISE", "GOOGLE_GENAI_USE_VERTEXAI"))


def _duration(unit: str, **bounds: int) -> BeforeValidator:
    """A timedelta given as a number of `unit` (hours, seconds), within `bounds` (gt=, ge=, le=)."""
    number = TypeAdapter(Annotated[Decimal, Field(**bounds)])
    # Bounded before the conversion: timedelta(hours=1e30) is an OverflowError, not a refusal.
    return BeforeValidator(lambda v: timedelta(**{unit: float(number.validate_python(v))}) if isinstance(v, str) else v)


def _entries(raw: str) -> Iterator[tuple[str, str, str]]:
    """Each entry of a comma-separated `left:right` list: (the entry, left, right), right "" without a colon."""
    for entry in filter(None, (item.strip() for item in raw.split(","))):
        left, sep, right = (part.strip() for part in entry.partition(":"))
        yield entry, left, right if sep else ""


def parse_approvers(raw: Any) -> Any:
    """APPROVERS, `name:token[:group+group],...`, as {token: Approver}: canonical names, each in EVERYONE too."""
    if isinstance(raw, dict):  # {token: name}, as tests and programs give it
        return {token: Approver(_name(who, "approver name")) if isinstance(who, str) else who
                for token, who in raw.items()}
    found: dict[str, Approver] = {}
    for entry, who, rest in _entries(raw):
        token, _, groups = rest.partition(":")
        if not who or not token:
            raise ValueError(f"entry {entry!r} must look like name:token or name:token:group+group "
                             "(e.g. bob:s3cret-t0ken:finance).")
        canonical = _name(who, "approver name")
        if len(token) < MIN_TOKEN:
            raise ValueError(f"the token of {canonical} is too short; use {MIN_TOKEN} or more characters.")
        if token in found:
            raise ValueError(f"{found[token].name} and {canonical} have the same token; give each their own.")
        named = {_name(group, "group name") for group in groups.split("+") if group.strip()}
        found[token] = Approver(canonical, frozenset({EVERYONE, *named}))
    return found


# Slack's member ids: U012AB3CD (W… on Enterprise Grid).
_SLACK_USER = re.compile(r"^[UW][A-Z0-9]{2,30}$")


def _slack_approvers(raw: Any) -> Any:
    """`U012AB3CD:bob,U045EF6GH:carol` as {Slack user id: approver name}, names in their canonical form."""
    if not isinstance(raw, str):
        return raw
    mapped: dict[str, str] = {}
    for entry, user, who in _entries(raw):
        if not _SLACK_USER.match(user) or not who:
            raise ValueError(f"entry {entry[:60]!r} must look like SlackUserId:name (e.g. U012AB3CD:bob; the id is "
                             "under the person's Slack profile, ⋮ > Copy member ID).")
        if user in mapped:
            raise ValueError(f"{user} is named twice; map each Slack user to one approver.")
        mapped[user] = _name(who, "approver name")
    return mapped


# Where Slack's response_urls point (docs/slack.md); SLACK_RESPONSE_URL_HOSTS replaces them.
SLACK_HOSTS = ("hooks.slack.com", "hooks.slack-gov.com")


def _hosts(raw: Any) -> Any:
    """`hooks.slack.com,127.0.0.1` as ("hooks.slack.com", "127.0.0.1"): host names, with no scheme, port or path."""
    hosts = tuple(h.strip() for h in raw.lower().split(",") if h.strip()) if isinstance(raw, str) else raw
    if not hosts or not all(re.fullmatch(r"[a-z0-9.:-]+", host) for host in hosts):
        raise ValueError(f"must be host names, comma-separated, e.g. {','.join(SLACK_HOSTS)} (no scheme, port, path).")
    return hosts


def _clients(raw: Any) -> Any:
    """A2A_CLIENTS, `name:token,...`, as {token: the requester's name}: an agent calls as that name (docs/a2a.md)."""
    found: dict[str, str] = {}
    for entry, who, token in _entries(raw) if isinstance(raw, str) else ():
        if not who or len(token) < MIN_TOKEN or ":" in token or token in found:
            raise ValueError(f"entry {entry.partition(':')[0][:40]!r} must be name:token, with a token of its own of "
                             f"{MIN_TOKEN} or more characters (e.g. travel-bot:a-long-random-token).")
        found[token] = _name(who, "client name")
    return found if isinstance(raw, str) else raw


def _slack_token(token: str | None) -> str | None:
    if token is not None and not token.startswith("xoxb-"):
        raise ValueError("must be the app's bot token, which starts with xoxb- (Slack app settings > OAuth & "
                         "Permissions > Bot User OAuth Token).")
    return token


def _names(raw: Any) -> Any:
    return tuple(dict.fromkeys(_name(n, "name") for n in raw.split(",") if n.strip())) if isinstance(raw, str) else raw


def _name(raw: str, field: str) -> str:
    try:
        return name(raw, field)
    except InputError as error:
        raise ValueError(str(error)) from None


Dollars = Annotated[Decimal, Field(gt=0, le=1_000_000_000)]
Flag = Annotated[bool, BeforeValidator(lambda v: v.strip() if isinstance(v, str) else v)]
Text = Annotated[str | None, BeforeValidator(lambda v: v.strip() or None if isinstance(v, str) else v)]
# 0 hours is None: no reminders. At most 8760 hours, APPROVAL_TTL_HOURS's own limit, which it stays below.
Reminder = Annotated[timedelta | None, _duration("hours", ge=0, le=8760), AfterValidator(lambda d: d or None)]


class Settings(BaseSettings):
    """Every setting, checked. A field's alias is its variable; its description, what to set that to."""

    model_config = SettingsConfigDict(frozen=True, case_sensitive=True, env_ignore_empty=True)

    database_url: Annotated[str, AfterValidator(usable_url)] = Field(
        default=DEFAULT_DATABASE_URL, alias="EXPENSES_DATABASE_URL")
    approval_threshold: Dollars = Field(default=Decimal(100), alias="APPROVAL_THRESHOLD",
                                        description="dollars, more than 0 and at most MAX_REIMBURSEMENT, e.g. 100")
    max_amount: Dollars = Field(default=Decimal(1_000_000), alias="MAX_REIMBURSEMENT",
                                description="dollars, more than 0 and at most 1000000000, e.g. 1000000")
    approval_ttl: Annotated[timedelta, _duration("hours", gt=0, le=8760)] = Field(
        default=timedelta(hours=72), alias="APPROVAL_TTL_HOURS",
        description="hours, more than 0 and at most 8760, e.g. 72")
    dev_chat_approval: Flag = Field(default=False, alias="DEV_CHAT_APPROVAL", description="true or false")
    approvers: Annotated[dict[str, Approver], NoDecode, BeforeValidator(parse_approvers)] = Field(
        default={}, alias="APPROVERS")
    approval_policy: Path | None = Field(default=None, alias="APPROVAL_POLICY")
    sweep_interval: Annotated[timedelta, _duration("seconds", gt=0, le=3600)] = Field(
        default=timedelta(seconds=30), alias="EXPIRY_SWEEP_SECONDS",
        description="seconds, more than 0 and at most 3600, e.g. 30")
    trusted_user_header: Text = Field(default=None, alias="TRUSTED_USER_HEADER")
    production: Flag = Field(default=False, alias="PRODUCTION_MODE", description="true or false")
    # What operators see (docs/operations.md); OpenTelemetry reads the other OTEL_* variables itself.
    metrics_token: Text = Field(default=None, alias="METRICS_TOKEN")
    log_format: Literal["text", "json"] = Field(default="text", alias="LOG_FORMAT", description="text or json")
    trace_content: Flag = Field(default=False, alias="TRACE_CONTENT", description="true or false")
    otlp_endpoint: Text = Field(default=None, alias="OTEL_EXPORTER_OTLP_ENDPOINT")
    daily_auto_approval_limit: Decimal = Field(
        default=Decimal(250), alias="DAILY_AUTO_APPROVAL_LIMIT", ge=0, le=10_000_000, decimal_places=2,
        description="0 or a number of dollars and cents up to 10000000, e.g. 250")
    auto_migrate: Flag = Field(default=True, alias="AUTO_MIGRATE", description="true or false")
    dual_approval_above: Dollars = Field(default=Decimal(5000), alias="DUAL_APPROVAL_ABOVE",
                                         description="dollars, at least APPROVAL_THRESHOLD, e.g. 5000")
    # Notifications (docs/notifications.md): a webhook, reminders, escalation.
    webhook_url: HttpUrl | None = Field(default=None, alias="APPROVAL_WEBHOOK_URL", description=(
        "an http(s) URL, e.g. https://hooks.slack.com/services/... or http://127.0.0.1:9000/hook"))
    webhook_secret: Text = Field(default=None, alias="APPROVAL_WEBHOOK_SECRET")
    webhook_timeout: Annotated[timedelta, _duration("seconds", gt=0, le=30)] = Field(
        default=timedelta(seconds=5), alias="APPROVAL_WEBHOOK_TIMEOUT_SECONDS",
        description="seconds, more than 0 and at most 30, e.g. 5")
    remind_before: Reminder = Field(default=timedelta(hours=24), alias="APPROVAL_REMIND_BEFORE_HOURS",
                                    description="hours, less than APPROVAL_TTL_HOURS, e.g. 24, or 0 for no reminders")
    escalate_to: Annotated[tuple[str, ...], NoDecode, BeforeValidator(_names)] = Field(default=(), alias="ESCALATE_TO")
    # Interactive Slack approvals (docs/slack.md): buttons in the webhook's messages, clicks at POST /slack/actions.
    slack_signing_secret: Text = Field(default=None, alias="SLACK_SIGNING_SECRET")
    slack_approvers: Annotated[dict[str, str], NoDecode, BeforeValidator(_slack_approvers)] = Field(
        default={}, alias="SLACK_APPROVERS")
    slack_bot_token: Annotated[Text, AfterValidator(_slack_token)] = Field(default=None, alias="SLACK_BOT_TOKEN")
    slack_api_url: HttpUrl = Field(default=HttpUrl("https://slack.com/api/"), alias="SLACK_API_URL",
                                   description="an http(s) URL, e.g. https://slack.com/api/")
    slack_inbox_url: HttpUrl | None = Field(default=None, alias="SLACK_INBOX_URL",
                                            description="an http(s) URL, e.g. https://expenses.example.com/inbox")
    slack_team_id: Text = Field(default=None, alias="SLACK_TEAM_ID")
    slack_response_url_hosts: Annotated[tuple[str, ...], NoDecode, BeforeValidator(_hosts)] = Field(
        default=SLACK_HOSTS, alias="SLACK_RESPONSE_URL_HOSTS")
    # Other agents over A2A (docs/a2a.md): who may call, as which requester, and where their pushes may go.
    a2a_clients: Annotated[dict[str, str], NoDecode, BeforeValidator(_clients)] = Field(default={}, alias="A2A_CLIENTS")
    a2a_push_hosts: Annotated[tuple[str, ...], NoDecode, BeforeValidator(lambda v: v and _hosts(v))] = Field(
        default=(), alias="A2A_PUSH_HOSTS")
    model: Annotated[ModelSettings, NoDecode, BeforeValidator(lambda v: ModelSettings(
        v.strip() or None, _gemini_credentials(), _gemini_address()) if isinstance(v, str) else v,
    )] = Field(default_factory=model_settings, alias="AGENT_MODEL")

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        """Rules across settings; each message names the variables and the fix."""
        if self.approval_threshold > self.max_amount:
            raise ValueError(f"APPROVAL_THRESHOLD={self.approval_threshold} is above MAX_REIMBURSEMENT="
                             f"{self.max_amount}; set it to at most {self.max_amount}, e.g. 100.")
        if self.production and self.trusted_user_header is None:
            raise ValueError(
                "PRODUCTION_MODE=true needs TRUSTED_USER_HEADER, the header your authenticating proxy sets "
                "(e.g. X-Forwarded-User for oauth2-proxy), so requesters cannot pick their own user id.")
        if self.webhook_url is not None and len(self.webhook_secret or "") < MIN_SECRET:
            raise ValueError(
                f"APPROVAL_WEBHOOK_URL is set, so APPROVAL_WEBHOOK_SECRET needs a value of {MIN_SECRET} characters "
                "or more: every webhook is signed with it (a receiver checks X-Signature-256; Slack ignores it). "
                f"One way: {PYTHON} -c 'import secrets; print(secrets.token_hex(32))'")
        if self.dual_approval_above < self.approval_threshold:
            raise ValueError(f"DUAL_APPROVAL_ABOVE={self.dual_approval_above} is below APPROVAL_THRESHOLD="
                             f"{self.approval_threshold}: amounts in between would be paid with no approval at all. "
                             f"Set DUAL_APPROVAL_ABOVE to {self.approval_threshold} or more.")
        if self.approval_policy is None and len(self.approvers) == 1:
            [only] = self.approvers.values()
            raise ValueError(f"APPROVERS names one approver ({only.name}), but requests above DUAL_APPROVAL_ABOVE "
                             f"(${self.dual_approval_above:,}), alone or added up, need two different approvers. "
                             "Add a second name:token to APPROVERS.")
        if self.approval_policy is not None and {"approval_threshold", "dual_approval_above"} & self.model_fields_set:
            raise ValueError("APPROVAL_POLICY is set, so its tiers say what needs approval: unset APPROVAL_THRESHOLD "
                             "and DUAL_APPROVAL_ABOVE (its lowest tier's `above` is the threshold).")
        if shared := [n for t, n in self.a2a_clients.items() if t in self.approvers]:
            raise ValueError(f"A2A_CLIENTS gives {shared[0]} an approver's token; a client's token must never approve: "
                             "give each client a token of its own.")
        unknown = [n for n in self.escalate_to if self.approvers and n not in self.approver_names]
        if unknown:
            raise ValueError(f"ESCALATE_TO names {', '.join(unknown)}, who is not in APPROVERS; escalate to "
                             f"approvers who can decide: {', '.join(sorted(self.approver_names))}.")
        if self.remind_before is not None and self.remind_before >= self.approval_ttl:
            raise ValueError(
                f"APPROVAL_REMIND_BEFORE_HOURS={self.remind_before.total_seconds() / 3600:g} must be less than "
                f"APPROVAL_TTL_HOURS ({self.approval_ttl.total_seconds() / 3600:g}): a reminder goes out "
                "before the ticket expires.")
        return self

    @model_validator(mode="after")
    def _slack(self) -> Settings:
        """Slack approvals need the webhook, approvers who are in APPROVERS, and somewhere for words."""
        if self.slack_signing_secret is None:
            for name, value in (("SLACK_APPROVERS", self.slack_approvers), ("SLACK_BOT_TOKEN", self.slack_bot_token),
                                ("SLACK_TEAM_ID", self.slack_team_id)):
                if value:
                    raise ValueError(f"{name} is set but SLACK_SIGNING_SECRET is not: without it no click from "
                                     "Slack can be verified. Set it to the app's Signing Secret (Slack app settings "
                                     f"> Basic Information), or unset {name}.")
            return self
        if len(self.slack_signing_secret) < MIN_SECRET:
            raise ValueError(f"SLACK_SIGNING_SECRET is too short for a Slack signing secret ({MIN_SECRET} characters "
                             "or more); copy it from Slack app settings > Basic Information > Signing Secret.")
        if self.webhook_url is None:
            raise ValueError("SLACK_SIGNING_SECRET is set, so APPROVAL_WEBHOOK_URL must be the Slack incoming "
                             "webhook the buttons are posted to (https://hooks.slack.com/services/...).")
        if not self.slack_approvers:
            raise ValueError("SLACK_SIGNING_SECRET is set, so SLACK_APPROVERS must say which Slack users approve "
                             "as whom, e.g. SLACK_APPROVERS=U012AB3CD:bob,U045EF6GH:carol.")
        names = self.approver_names
        strangers = sorted({n for n in self.slack_approvers.values() if n not in names})
        if strangers:
            known = ", ".join(sorted(names)) or "nobody: APPROVERS is not set"
            raise ValueError(f"SLACK_APPROVERS names {', '.join(strangers)}, who is not in APPROVERS ({known}); "
                             "a Slack user can only approve as an approver. Add them to APPROVERS or remove them.")
        if self.slack_bot_token is None and self.slack_inbox_url is None:
            raise ValueError("SLACK_SIGNING_SECRET is set without SLACK_BOT_TOKEN, so Reject and Approve less link "
                             "to the inbox page: set SLACK_INBOX_URL to its address (e.g. "
                             "https://expenses.example.com/inbox), or set SLACK_BOT_TOKEN to open a form in Slack.")
        if importlib.util.find_spec("slack_sdk") is None:  # an optional extra
            raise ValueError("SLACK_SIGNING_SECRET is set, but slack_sdk is not installed: "
                             f"{PYTHON} -m pip install -e '.[slack]' (from the project folder).")
        return self

    @property
    def approver_names(self) -> frozenset[str]:
        return frozenset(a.name for a in self.approvers.values())

    @property
    def slack(self) -> bool:
        """Interactive Slack approvals are on (every check above passed)."""
        return self.slack_signing_secret is not None


_PLAINLY = {"decimal_parsing": "is not a number", "bool_parsing": "is not true or false",
            "url_parsing": "is not a URL", "url_scheme": "must be an http(s) URL"}


def _explain(error: Mapping[str, Any]) -> str:
    """One of pydantic's errors, worded for whoever sets the variable."""
    message = str(error["msg"]).removeprefix("Value error, ")
    if not error["loc"]:  # a rule across settings: the message names them
        return message
    name = str(error["loc"][0])
    if error["type"] == "value_error":  # a check of ours: its message never repeats a token or secret
        return f"{name}: {message}"
    why = _PLAINLY.get(error["type"], f"is refused ({message})")
    field = next(f for f in Settings.model_fields.values() if f.alias == name)
    return f"{name}={error['input']!r} {why}; set it to {field.description}."


def load_settings() -> Settings:
    """Read and check every setting from the environment."""
    try:
        return Settings()
    except ValidationError as error:
        raise SettingsError(" ".join(_explain(e) for e in error.errors())) from None

