"""Which model runs: AGENT_MODEL if set, else Gemini with credentials, else offline."""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import ModelSettings
from .offline import OFFLINE_MODEL_NAME

GEMINI_DEFAULT = "gemini-3.5-flash"


@dataclass(frozen=True)
class ModelChoice:
    name: str
    reason: str

    def __str__(self) -> str:
        """As main.py and `make web` print it: the model, and why it is the one that runs."""
        return f"{self.name} ({self.reason})"


def choose_model(settings: ModelSettings) -> ModelChoice:
    configured = settings.agent_model
    credentials = settings.gemini_credentials
    if configured:
        reason = "AGENT_MODEL is set"
        if configured != OFFLINE_MODEL_NAME and credentials is None:
            reason += ("; no Gemini credentials are configured, so calls will fail - set "
                       "GOOGLE_API_KEY, or unset AGENT_MODEL to use the offline model")
        return ModelChoice(configured, reason)
    if credentials:
        return ModelChoice(GEMINI_DEFAULT, f"Gemini, using {credentials}")
    return ModelChoice(OFFLINE_MODEL_NAME,
                       "offline rule-based model: no GOOGLE_API_KEY or Vertex AI project is configured")
