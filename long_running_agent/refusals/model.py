"""What a model that cannot be reached, or refuses, becomes (model/failure.py)."""

from __future__ import annotations

from typing import ClassVar

from . import Refusal


class ModelUnavailable(Refusal):
    """The model's address could not be reached, or its service answered with an error status (`kind`: NEXT's keys).

    Its text (str) holds the next step too: ADK shows only that text where a run fails (an error event, an SSE end).
    """

    code = "model_unavailable"
    # ADK names a failed run's error event by the exception's `status` (workflow/_node_runner.py).
    status = code
    # Whether a log already holds it: ADK logs one failure several times (model/failure.py).
    logged = False
    NEXT: ClassVar[dict[str, str]] = {
        "network": "Check the network between this machine and that address (a proxy, a firewall), and "
                   "GOOGLE_GEMINI_BASE_URL if you set it (unset, it is Google's); once it answers, the key "
                   "(GOOGLE_API_KEY) and the model name (AGENT_MODEL) are checked next.",
        "credentials": "Set GOOGLE_API_KEY (or GEMINI_API_KEY) to a Gemini API key "
                       "(https://aistudio.google.com/apikey); for Vertex AI, run gcloud auth application-default "
                       "login. Or unset AGENT_MODEL to run the offline model.",
        "key": "Check the key: GOOGLE_API_KEY (or GEMINI_API_KEY) must be a valid Gemini API key "
               "(https://aistudio.google.com/apikey); for Vertex AI, your credentials must be allowed to use "
               "GOOGLE_CLOUD_PROJECT. Then check the model name (AGENT_MODEL) and GOOGLE_GEMINI_BASE_URL if you "
               "set it.",
        "model": "Check the model name: AGENT_MODEL must name a model this key can use (unset, it is the "
                 "default Gemini model); then GOOGLE_GEMINI_BASE_URL, if you set it.",
        "quota": "The key's quota or rate limit is used up: wait a minute and try again, or check the quota of "
                 "the key's project.",
        "service": "The model's service failed on its side: try again in a while; if it goes on, check "
                   "GOOGLE_GEMINI_BASE_URL if you set it.",
        "refused": "Check the model name (AGENT_MODEL), the key (GOOGLE_API_KEY) and GOOGLE_GEMINI_BASE_URL if "
                   "you set it.",
    }
    WHAT: ClassVar[dict[str, str]] = {"network": "could not be reached at", "service": "failed to answer at",
                                      "credentials": "has no credentials to call"}

    def __init__(self, model: str, address: str, problem: str, kind: str) -> None:
        self.kind = kind
        what = self.WHAT.get(kind, "refused the request at")
        super().__init__(f"The model {model} {what} {address}: {problem.rstrip('.')}.", next_step=self.NEXT[kind])

    def __str__(self) -> str:
        return f"{self.message} {self.next_step}"

    @classmethod
    def parts(cls, text: str) -> tuple[str, str] | None:
        """The message and the next step of a ModelUnavailable's text, or None if `text` is not one."""
        for next_step in cls.NEXT.values():
            if text.startswith("The model ") and text.endswith(f" {next_step}"):
                return text[: -len(next_step) - 1], next_step
        return None
