"""Which model runs: AGENT_MODEL if set, else Gemini with credentials, else offline."""

from __future__ import annotations

import os
from dataclasses import dataclass

from .offline_model import OFFLINE_MODEL_NAME

GEMINI_DEFAULT = "gemini-3.5-flash"


@dataclass(frozen=True)
class ModelChoice:
    name: str
    reason: str

    @property
    def is_offline(self) -> bool:
        return self.name == OFFLINE_MODEL_NAME


def _truthy(name: str) -> bool:
    return os.getenv(name, "").strip().lower() in {"1", "true", "yes"}


def gemini_credentials() -> str | None:
    """A description of the configured Gemini credentials, or None."""
    if _truthy("GOOGLE_GENAI_USE_ENTERPRISE") or _truthy("GOOGLE_GENAI_USE_VERTEXAI"):
        project = os.getenv("GOOGLE_CLOUD_PROJECT")
        return f"Vertex AI project {project}" if project else None
    if os.getenv("GOOGLE_API_KEY") or os.getenv("GEMINI_API_KEY"):
        return "GOOGLE_API_KEY"
    return None


def choose_model() -> ModelChoice:
    configured = os.getenv("AGENT_MODEL", "").strip()
    credentials = gemini_credentials()
    if configured:
        reason = "AGENT_MODEL is set"
        if configured != OFFLINE_MODEL_NAME and credentials is None:
            reason += (
                "; no Gemini credentials are configured, so calls will fail - set "
                "GOOGLE_API_KEY, or unset AGENT_MODEL to use the offline model"
            )
        return ModelChoice(configured, reason)
    if credentials:
        return ModelChoice(GEMINI_DEFAULT, f"Gemini, using {credentials}")
    return ModelChoice(
        OFFLINE_MODEL_NAME,
        "offline rule-based model: no GOOGLE_API_KEY or Vertex AI project is configured",
    )
