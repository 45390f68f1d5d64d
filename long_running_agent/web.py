"""One server for every surface: ADK's dev UI and API, plus the approver inbox.

ADK's own FastAPI app (`adk web`: the dev UI, /run, /run_sse, /apps/...)
serves the agent, and this module adds the page and API approvers use. Both
share one database with the ledger, and a decision made here resumes the
conversation the requester started in the dev UI or over /run.

Run with:
    python -m long_running_agent.web                  # http://127.0.0.1:8000
    python -m long_running_agent.web --port 8080
    python -m long_running_agent.web --host 0.0.0.0   # other machines too (see README)

Routes added to ADK's app (every /api route needs `Authorization: Bearer <token>`,
tokens from APPROVERS; a missing token is 401, an unknown one 403):
    GET  /inbox                               the approver page
    GET  /api/approvals                       pending tickets and recent decisions
    GET  /api/approvals/{ticket_id}           one ticket, its audit trail and payouts
    POST /api/approvals/{ticket_id}/approve   body optional: {"reason": "..."}
    POST /api/approvals/{ticket_id}/reject    body required: {"reason": "..."}
    POST /api/approvals/{ticket_id}/resume    deliver a recorded decision again (after a failure)
"""

from __future__ import annotations

import argparse
import hmac
import logging
import socket
import sys
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import uvicorn
from fastapi import Depends, FastAPI, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from google.adk.cli.fast_api import get_fast_api_app
from google.adk.cli.service_registry import get_service_registry
from google.adk.cli.utils.agent_loader import AgentLoader
from google.adk.events import Event
from google.adk.runners import Runner
from google.adk.sessions import DatabaseSessionService
from pydantic import BaseModel, ConfigDict, Field

from .agent import app as agent_app
from .approvals import decide_and_resume, resume
from .guard import REFUSAL_PREFIX
from .ledger import (
    PENDING,
    AlreadyDecided,
    AuditEntry,
    Ledger,
    LedgerError,
    NotAllowed,
    Payout,
    Ticket,
    TicketExpired,
    TicketNotFound,
    close_ledgers,
    get_ledger,
    utc_now,
)
from .model_choice import choose_model
from .policy import from_cents
from .runtime import session_service
from .settings import SettingsError, load_settings

logger = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parent
APP_NAME = PACKAGE_DIR.name  # ADK names the app after its folder

# ADK raises these ValueErrors while matching an incoming message to a pending
# call, before any plugin runs; /run would answer them with a plain-text 500.
_RESUME_ERRORS = (
    "Function call not found for function response ids",
    "Function response id is required",
    "Message cannot contain both function responses and text",
    "Function responses resolve to multiple invocations",
    "User message cannot contain function calls",
)


class ApiError(Exception):
    """An answer of the approvals API that is not a success, as a JSON body."""

    def __init__(self, status: int, error: str, message: str, fix: str) -> None:
        super().__init__(message)
        self.status, self.error, self.message, self.fix = status, error, message, fix

    def response(self) -> JSONResponse:
        body = {"error": self.error, "message": self.message, "fix": self.fix}
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else None
        return JSONResponse(body, status_code=self.status, headers=headers)


_LEDGER_FIXES: dict[type[LedgerError], tuple[str, str]] = {
    TicketNotFound: ("ticket_not_found", "Check the id; GET /api/approvals lists the pending tickets."),
    AlreadyDecided: ("already_decided", "Nothing to do: the first decision stands. "
                     "GET /api/approvals/{id} shows its history."),
    TicketExpired: ("ticket_expired", "Nothing to do: the requester was told it expired and has to ask again."),
    NotAllowed: ("not_allowed", "Ask another approver to decide this ticket."),
}
UNDELIVERED_FIX = (
    "The decision is recorded but has not reached the conversation yet; deliver it with "
    "POST /api/approvals/{id}/resume (or: python main.py resume {id})."
)


async def _ledger_error(ledger: Ledger, error: LedgerError, ticket_id: str) -> ApiError:
    code, fix = _LEDGER_FIXES.get(type(error), ("refused", "See the message."))
    if isinstance(error, AlreadyDecided) and not (await ledger.get(ticket_id)).delivered_at:
        fix = UNDELIVERED_FIX
    return ApiError(error.http_status, code, str(error), fix.replace("{id}", ticket_id))


class Decision(BaseModel):
    """Body of approve and reject."""

    model_config = ConfigDict(extra="forbid")
    reason: str | None = Field(default=None, max_length=500)


# --- authentication -------------------------------------------------------------


def current_approver(request: Request) -> str:
    """The approver named by the bearer token; tokens come from APPROVERS (name:token,...)."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(
            401, "missing_token", "This API needs an approver token.",
            "Send the header 'Authorization: Bearer <token>'; tokens are set on the server in APPROVERS.",
        )
    approvers = load_settings().approvers
    for known, name in approvers.items():
        if hmac.compare_digest(known.encode(), token.strip().encode()):
            return name
    raise ApiError(
        403, "unknown_token",
        "No approver has this token." if approvers else "No approvers are configured on this server.",
        "Use the token your administrator gave you; they are set on the server as "
        "APPROVERS=name:token,name:token (then restart it).",
    )


# --- JSON views ---------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value else None


def ticket_json(ticket: Ticket) -> dict[str, Any]:
    return {
        "id": ticket.id,
        "status": ticket.status,
        "requester": ticket.user_id,
        "amount": ticket.amount,
        "amount_text": f"${from_cents(ticket.amount_cents):,}",
        "purpose": ticket.purpose,
        "created_at": _iso(ticket.created_at),
        "age_seconds": int((utc_now() - ticket.created_at).total_seconds()),
        "expires_at": _iso(ticket.expires_at),
        "decided_by": ticket.decided_by,
        "decided_at": _iso(ticket.decided_at),
        "reason": ticket.reason,
        "delivered_at": _iso(ticket.delivered_at),
        "session_id": ticket.session_id,
    }


def payout_json(payout: Payout) -> dict[str, Any]:
    return payout.as_response() | {"requester": payout.user_id}


def audit_json(entry: AuditEntry) -> dict[str, Any]:
    return {"at": _iso(entry.at), "actor": entry.actor, "action": entry.action, "detail": entry.detail}


def agent_reply(events: list[Event]) -> str | None:
    """The last thing the agent said while resuming, as the requester will see it."""
    texts = [
        part.text
        for event in events
        if event.author != "user" and event.content and event.content.parts
        for part in event.content.parts
        if part.text and not part.thought
    ]
    return texts[-1] if texts else None


# --- the app ----------------------------------------------------------------------


def create_app(*, host: str = "127.0.0.1", port: int = 8000) -> FastAPI:
    """ADK's dev UI and API for this package, plus the approver inbox and its API."""
    database_url = load_settings().database_url
    # One tuned session service (WAL and a busy timeout on SQLite, shared with
    # the ledger's file) for ADK's routes and for resuming after a decision.
    # ADK looks the URL's scheme up in its service registry - the documented
    # hook for custom session services - before building its own.
    sessions = session_service(database_url)

    def shared_sessions(uri: str, **kwargs: Any) -> DatabaseSessionService:
        return sessions

    get_service_registry().register_session_service(urlparse(database_url).scheme, shared_sessions)
    resumer = Runner(app=agent_app, session_service=sessions)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        await resumer.close()
        await close_ledgers()

    app = get_fast_api_app(
        agents_dir=str(PACKAGE_DIR.parent),
        # A loader for this one package: the app list shows long_running_agent
        # only, whatever else (tests, benchmarks, docs) sits in the repo root.
        agent_loader=AgentLoader(str(PACKAGE_DIR)),
        session_service_uri=database_url,
        artifact_service_uri="memory://",
        web=True,
        host=host,
        port=port,
        # ADK turns on DNS-rebinding protection for a loopback bind, and warns
        # that its own routes have no authentication for any other.
        bind_host=host,
        lifespan=lifespan,
    )
    add_inbox(app, resumer)
    return app


def add_inbox(app: FastAPI, resumer: Runner) -> None:
    """Mount the inbox page and the approvals API on ADK's app."""

    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, error: ApiError) -> JSONResponse:
        return error.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid_body(request: Request, error: RequestValidationError) -> JSONResponse:
        if not request.url.path.startswith("/api/approvals"):
            return await request_validation_exception_handler(request, error)
        problems = "; ".join(
            "body: not valid JSON" if e["type"] == "json_invalid"
            else f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e['msg']}"
            for e in error.errors()
        )
        return ApiError(
            422, "invalid_body", f"The request body is not valid: {problems}.",
            'Send JSON like {"reason": "not a business expense"} (reason: text, at most 500 '
            "characters; required to reject), or no body to approve.",
        ).response()

    @app.exception_handler(ValueError)
    async def _bad_resume(request: Request, error: ValueError) -> JSONResponse:
        # ADK's /run lets these escape as a plain-text 500; they are the
        # caller's mistake, so say which and how to answer a pending call.
        if request.url.path != "/run" or not str(error).startswith(_RESUME_ERRORS):
            raise error
        return ApiError(
            400, "invalid_function_response", str(error),
            "Answer only a pending call, with its id: the event whose longRunningToolIds lists it "
            "(GET /apps/{app}/users/{user}/sessions/{session}). Approvals themselves are decided "
            "with POST /api/approvals/{ticket_id}/approve or /reject, not over /run.",
        ).response()

    @app.get("/inbox", response_class=HTMLResponse, include_in_schema=False)
    async def inbox_page() -> HTMLResponse:
        page = resources.files(__package__).joinpath("inbox.html").read_text(encoding="utf-8")
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    @app.get("/api/approvals")
    async def list_approvals(approver: str = Depends(current_approver)) -> dict[str, Any]:
        ledger = get_ledger(load_settings().database_url)
        await ledger.expire_due()
        return {
            "approver": approver,
            "pending": [ticket_json(t) for t in await ledger.list_tickets()],
            "recent_decisions": [ticket_json(t) for t in await ledger.recent_decisions(limit=10)],
        }

    async def find(ledger: Ledger, ticket_id: str) -> Ticket:
        try:
            return await ledger.get(ticket_id)
        except LedgerError as error:
            raise await _ledger_error(ledger, error, ticket_id) from None

    @app.get("/api/approvals/{ticket_id}")
    async def show_approval(ticket_id: str, _approver: str = Depends(current_approver)) -> dict[str, Any]:
        ledger = get_ledger(load_settings().database_url)
        ticket = await find(ledger, ticket_id)
        return {
            "ticket": ticket_json(ticket),
            "audit": [audit_json(e) for e in await ledger.audit(ticket_id)],
            "payouts": [payout_json(p) for p in await ledger.payouts(ticket_id=ticket_id)],
        }

    async def outcome(ledger: Ledger, ticket_id: str, events: list[Event]) -> dict[str, Any]:
        return {
            "ticket": ticket_json(await ledger.get(ticket_id)),
            "payouts": [payout_json(p) for p in await ledger.payouts(ticket_id=ticket_id)],
            "agent_reply": agent_reply(events),
        }

    async def decide(ticket_id: str, approver: str, approve: bool, reason: str | None) -> dict[str, Any]:
        ledger = get_ledger(load_settings().database_url)
        try:
            # The ledger first (a conditional UPDATE: one decision wins), then
            # the conversation, resumed with the stored call id and name.
            _ticket, events = await decide_and_resume(
                resumer, ledger, ticket_id, approver=approver, approve=approve, reason=reason
            )
        except LedgerError as error:
            raise await _ledger_error(ledger, error, ticket_id) from None
        except Exception as error:
            # The model or the session store failed after the ledger may have
            # recorded the decision: say which, so nobody decides twice.
            ticket = await ledger.get(ticket_id)
            if ticket.status == PENDING:
                raise
            logger.exception("Resuming the conversation of %s failed", ticket_id)
            raise ApiError(
                502, "resume_failed",
                f"Ticket {ticket_id} is {ticket.status} in the ledger, but resuming its conversation "
                f"failed: {type(error).__name__}: {error}",
                UNDELIVERED_FIX.replace("{id}", ticket_id),
            ) from None
        return await outcome(ledger, ticket_id, events)

    @app.post("/api/approvals/{ticket_id}/approve")
    async def approve(
        ticket_id: str, body: Decision | None = None, approver: str = Depends(current_approver)
    ) -> dict[str, Any]:
        reason = body.reason.strip() if body and body.reason else None
        return await decide(ticket_id, approver, True, reason or None)

    @app.post("/api/approvals/{ticket_id}/reject")
    async def reject(
        ticket_id: str, body: Decision | None = None, approver: str = Depends(current_approver)
    ) -> dict[str, Any]:
        reason = (body.reason or "").strip() if body else ""
        if not reason:
            raise ApiError(
                422, "reason_required", "A rejection needs a reason; the requester is told it.",
                'Send JSON like {"reason": "not a business expense"}.',
            )
        return await decide(ticket_id, approver, False, reason)

    @app.post("/api/approvals/{ticket_id}/resume")
    async def redeliver(ticket_id: str, _approver: str = Depends(current_approver)) -> dict[str, Any]:
        """Deliver a recorded decision whose resume failed or whose process died."""
        ledger = get_ledger(load_settings().database_url)
        ticket = await find(ledger, ticket_id)
        if ticket.status == PENDING:
            raise ApiError(409, "still_pending", f"Ticket {ticket_id} is still pending; there is nothing to deliver.",
                           f"Approve or reject it: POST /api/approvals/{ticket_id}/approve or /reject.")
        if ticket.delivered_at:
            raise ApiError(409, "already_delivered", f"Ticket {ticket_id} was already {ticket.status} and delivered.",
                           f"Nothing to do. GET /api/approvals/{ticket_id} shows its history.")
        # The guard delivers a decision once, whoever asks and however often.
        events = await resume(resumer, ticket)
        if any((part.text or "").startswith(REFUSAL_PREFIX)
               for event in events if event.content for part in event.content.parts or []):
            raise ApiError(409, "already_delivered", f"Ticket {ticket_id} was delivered meanwhile.",
                           f"Nothing to do. GET /api/approvals/{ticket_id} shows its history.")
        return await outcome(ledger, ticket_id, events)


def main(argv: list[str] | None = None) -> int:
    # ADK flags its own in-memory credential service as experimental on every
    # start; nothing here can act on it.
    warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]", category=UserWarning)

    parser = argparse.ArgumentParser(description="Serve the dev UI, ADK's API and the approver inbox.")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    args = parser.parse_args(argv)

    try:
        settings = load_settings()
    except SettingsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    choice = choose_model()
    # A wildcard bind is reached through this machine's name, not "0.0.0.0".
    shown_host = socket.gethostname() if args.host in ("0.0.0.0", "::") else args.host
    base = f"http://{shown_host}:{args.port}"
    print(f"Model:     {choice.name} ({choice.reason})")
    print(f"Database:  {settings.database_url}")
    print(f"Dev UI:    {base}/dev-ui/?app={APP_NAME}")
    print(f"Inbox:     {base}/inbox")
    names = sorted(set(settings.approvers.values()))
    print(f"Approvers: {', '.join(names)}" if names else
          "Approvers: none - set APPROVERS=name:token,... in .env so someone can sign in to the inbox")
    uvicorn.run(create_app(host=args.host, port=args.port), host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
