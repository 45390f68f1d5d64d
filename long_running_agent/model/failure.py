"""A model that cannot be reached, or that refuses, as one refusal saying what to check (docs/gemini.md).

google-genai raises httpx's errors, or its APIError for an error status; ADK passes them up and logs each
with its traceback, twice or more per failure. Raised again as ModelUnavailable, the failure is logged
once, in the refusal's words, or as `observability.logs.log_model_failures` asks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from google.adk.agents.callback_context import CallbackContext
from google.adk.models.google_llm import Gemini
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.models.registry import LLMRegistry
from google.auth import exceptions as auth_errors
from google.genai import errors as genai_errors
from google.genai import types

from ..error_text import causes
from ..ledger.inputs import printable
from ..observability import logs
from ..refusals.model import ModelUnavailable

logger = logging.getLogger(__name__)

ADK_LOGGER = "google_adk"  # the parent of every logger ADK logs to
# google-genai's words when it builds its client with no key at all (AGENT_MODEL names Gemini, no GOOGLE_API_KEY).
NO_KEY = "No API key was provided"


def model_failed(callback_context: CallbackContext, llm_request: LlmRequest, error: Exception, *,
                 address: str, answer: Callable[[CallbackContext], bool] | None = None) -> LlmResponse | None:
    """The agent's on_model_error_callback: a Gemini that cannot be reached or refuses raises ModelUnavailable.

    Raised, not answered: a run whose model failed must fail, so a decision being delivered stays
    undelivered (delivery/guard.py) and is delivered again later. Other errors go on as ADK raised them.
    Where `answer` says a run may end well (plain adk, whose surfaces would show a raised failure as a
    traceback or a plain-text 500), the agent answers with the failure's paragraph instead.
    """
    failure = unavailable(error, llm_request.model or "", address)
    if failure is None:
        return None
    _quiet_adk_loggers()
    if answer is not None and answer(callback_context):
        # Once, and with ADK's traceback where ADK logs at DEBUG (`adk web --log_level debug`).
        logger.warning("%s", failure, exc_info=error if logging.getLogger(ADK_LOGGER).isEnabledFor(logging.DEBUG)
                       else None)
        return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=str(failure))]))
    raise failure from error


def unavailable(error: BaseException, model: str, address: str) -> ModelUnavailable | None:
    """`error` as ModelUnavailable if it is Gemini's service failing (the network, or an error status), else None."""
    if not _is_gemini(model):
        return None
    for cause in causes(error):
        if isinstance(cause, genai_errors.APIError):
            return ModelUnavailable(model, address, _said(cause), _kind(cause))
        if isinstance(cause, (httpx.TransportError, OSError)):  # OSError: DNS, refused, timeouts; aiohttp's too
            return ModelUnavailable(model, address, _named(cause), "network")
        # No credentials at all: Vertex AI's Application Default Credentials missing, or no key.
        if isinstance(cause, auth_errors.GoogleAuthError) or \
                (isinstance(cause, ValueError) and str(cause).startswith(NO_KEY)):
            return ModelUnavailable(model, address, _named(cause), "credentials")
    return None


def _named(error: BaseException) -> str:
    said = printable(str(error)).strip()
    return (f"{type(error).__name__}: {said}" if said else type(error).__name__)[:300]


def _kind(error: genai_errors.APIError) -> str:
    """What Gemini's error status says to check (its codes: https://ai.google.dev/gemini-api/docs/troubleshooting)."""
    code = error.code or 0
    if code == 429:
        return "quota"
    # An invalid key is a 400 INVALID_ARGUMENT whose ErrorInfo reason says so.
    if code in (401, 403) or any(reason.startswith("API_KEY") for reason in _reasons(error.details)):
        return "key"
    if code == 404:
        return "model"
    if code >= 500:
        return "service"
    return "refused"


def _reasons(details: Any) -> Iterator[str]:
    """The `reason` of each ErrorInfo in Gemini's error body."""
    body = details.get("error", details) if isinstance(details, dict) else {}
    for detail in body.get("details", []) if isinstance(body, dict) else []:
        if isinstance(detail, dict) and isinstance(detail.get("reason"), str):
            yield detail["reason"]


def _said(error: genai_errors.APIError) -> str:
    """What Gemini answered, e.g. "HTTP 400 INVALID_ARGUMENT: API key not valid. Please pass a valid API key."."""
    status = f" {error.status}" if error.status else ""
    message = printable(str(error.message or "")).strip()
    return f"HTTP {error.code}{status}" + (f": {message[:300]}" if message else "")


def _is_gemini(model: str) -> bool:
    try:
        return issubclass(LLMRegistry.resolve(model), Gemini)
    except ValueError:  # a name no registered model claims
        return False


def _one_paragraph(record: logging.LogRecord) -> bool:
    """A filter on ADK's records of a ModelUnavailable: the first as the failure's paragraph, the others dropped."""
    failure = next((c for c in causes(record.exc_info[1]) if isinstance(c, ModelUnavailable)), None) \
        if record.exc_info and record.exc_info[1] else None
    if failure is None:
        return True
    debug = logging.getLogger(ADK_LOGGER).isEnabledFor(logging.DEBUG)
    mode: logs.ModelFailures = logs.model_failures or ("tracebacks" if debug else "once")
    if mode == "tracebacks":
        return True
    if mode == "none" or failure.logged:
        return False
    failure.logged = True
    record.msg, record.args, record.exc_info, record.exc_text = str(failure), (), None, None
    record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
    return True


def _quiet_adk_loggers() -> None:
    """Filter each ADK logger, now that all exist (a logger's filters see only its own records, not its children's)."""
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if (name == ADK_LOGGER or name.startswith(f"{ADK_LOGGER}.")) and isinstance(logger, logging.Logger) \
                and _one_paragraph not in logger.filters:
            logger.addFilter(_one_paragraph)
