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
    GET  /inbox                               the approver page (and its /inbox/inbox.js, /inbox/inbox.css)
    GET  /api/approvals                       pending tickets (paged: ?limit=&offset=), decisions
                                              not delivered yet (?undelivered_limit=&undelivered_offset=),
                                              recent decisions
    GET  /api/approvals/{ticket_id}           one ticket, its audit trail and payouts
    POST /api/approvals/{ticket_id}/approve   body optional: {"reason": "..."}
    POST /api/approvals/{ticket_id}/reject    body required: {"reason": "..."}
    POST /api/approvals/{ticket_id}/resume    deliver a recorded decision again (after a failure)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
from fastapi.responses import HTMLResponse, JSONResponse, Response
from google.adk.cli.fast_api import get_fast_api_app
from google.adk.cli.service_registry import get_service_registry
from google.adk.cli.utils.agent_loader import AgentLoader
from google.adk.events import Event
from google.adk.sessions import DatabaseSessionService
from pydantic import BaseModel, ConfigDict
from sqlalchemy.exc import DBAPIError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import runtime
from .approvals import Delivery, Outcome, decide_and_deliver, deliver, deliver_due
from .inputs import InputError
from .ledger import (
    AlreadyDecided,
    AuditEntry,
    Ledger,
    LedgerError,
    NotAllowed,
    NotSettleable,
    Payout,
    Ticket,
    TicketExpired,
    TicketNotFound,
    get_ledger,
    utc_now,
)
from .model_choice import choose_model
from .paging import DEFAULT_LIMIT, MAX_LIMIT, Page, PagingError, parse_limit, parse_offset
from .policy import from_cents
from .security_headers import SecurityHeaders
from .settings import SettingsError, load_settings
from .web_gate import Gate

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

    def __init__(
        self, status: int, error: str, message: str, fix: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.error, self.message, self.fix = status, error, message, fix
        self.headers = dict(headers or {})
        if status == 401:
            self.headers["WWW-Authenticate"] = "Bearer"

    def body(self) -> dict[str, str]:
        return {"error": self.error, "message": self.message, "fix": self.fix}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers or None)


class JsonErrors:
    """Answer any unexpected error with JSON `{error, message, fix}`, never a plain-text 500.

    Starlette's outermost handler answers "Internal Server Error" as text and
    re-raises, which makes uvicorn drop the keep-alive connection. This one
    sits inside it, answers JSON, and lets the connection live. A stream that
    already started (an SSE run) can only be ended.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as error:
            logger.exception("Unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if started:
                with contextlib.suppress(Exception):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            answer = unexpected_error(error)
            await answer.response()(scope, receive, send)


def database_unavailable(request: Request, error: Exception) -> ApiError:
    """The database failed: say what may or may not have happened, and what to do."""
    logger.warning("Database error on %s %s: %s", request.method, request.url.path, error)
    ticket = request.path_params.get("ticket_id")
    deciding = request.method == "POST" and ticket
    message = (
        f"The database is unavailable, so this server cannot tell whether the decision on {ticket} was recorded."
        if deciding else "The database is unavailable; nothing was changed by this request."
    )
    fix = (
        f"When GET /health answers ok again, check GET /api/approvals/{ticket} and repeat only what is missing."
        if deciding else "Try again when GET /health answers ok."
    )
    return ApiError(503, "database_unavailable", message, fix, headers={"Retry-After": "5"})


def unexpected_error(error: Exception) -> ApiError:
    return ApiError(
        500, "internal_error",
        f"The server failed while answering: {type(error).__name__}. Nothing was changed by this answer "
        "unless GET /api/approvals/{id} shows it.",
        "Try again; if it persists, the server log has the details.",
    )




_LEDGER_FIXES: dict[type[LedgerError], tuple[str, str]] = {
    TicketNotFound: ("ticket_not_found", "Check the id; GET /api/approvals lists the pending tickets."),
    AlreadyDecided: ("already_decided", "Nothing to do: the first decision stands. "
                     "GET /api/approvals/{id} shows its history."),
    TicketExpired: ("ticket_expired", "Nothing to do: the requester was told it expired and has to ask again."),
    NotAllowed: ("not_allowed", "Another approver has to decide it."),
    NotSettleable: ("not_settleable", "GET /api/approvals/{id} shows its state; deliver it with "
                    "POST /api/approvals/{id}/resume while its conversation can be reached."),
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


# What a delivery that did not happen means for a client: (status, error, fix).
_DELIVERY_ERRORS: dict[Outcome, tuple[int, str, str]] = {
    Outcome.STILL_PENDING: (409, "still_pending",
                            "Approve or reject it first: POST /api/approvals/{id}/approve or /reject."),
    Outcome.ALREADY_DELIVERED: (409, "already_delivered",
                                "Nothing to do. GET /api/approvals/{id} shows its history."),
    Outcome.BUSY: (409, "conversation_busy",
                   "Another run is using the conversation; retry POST /api/approvals/{id}/resume shortly."),
    Outcome.UNREACHABLE: (502, "conversation_unreachable",
                          "It reaches the conversation when the requester next writes there. If that can never "
                          "happen, POST /api/approvals/{id}/settle pays an approved ticket without it."),
    Outcome.CONVERSATION_MISSING: (410, "conversation_missing",
                                   "The conversation was deleted; POST /api/approvals/{id}/settle pays an approved "
                                   "ticket without it (or closes a rejected one)."),
    Outcome.SETTLED: (409, "already_settled", "Nothing to do. GET /api/approvals/{id} shows its history."),
    Outcome.FAILED: (502, "delivery_failed",
                     "Fix the cause (see the server log), then POST /api/approvals/{id}/resume."),
}


def delivery_error(delivery: Delivery) -> ApiError:
    status, code, fix = _DELIVERY_ERRORS[delivery.outcome]
    ticket = delivery.ticket
    message = {
        Outcome.STILL_PENDING: f"Ticket {ticket.id} is still pending; there is nothing to deliver.",
        Outcome.ALREADY_DELIVERED: f"Ticket {ticket.id} was already {ticket.status}, and the decision "
                                   "reached its conversation.",
    }.get(delivery.outcome, f"Ticket {ticket.id} is {ticket.status} in the ledger, but the decision has not "
                            f"reached its conversation: {delivery.detail}. Looked in {delivery.where}.")
    headers = {"Retry-After": str(int(delivery.retry_after.total_seconds()))} if delivery.retry_after else None
    return ApiError(status, code, message, fix.replace("{id}", ticket.id), headers=headers)


class Decision(BaseModel):
    """Body of approve and reject."""

    model_config = ConfigDict(extra="forbid")
    reason: str | None = None


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
        "delivery_error": ticket.delivery_error,
        "settled_by": ticket.settled_by,
        "settled_at": _iso(ticket.settled_at),
        "session_id": ticket.session_id,
    }


INBOX_QUERY = ("limit", "offset", "undelivered_limit", "undelivered_offset")
PAGING_FIX = (
    f"Page with ?limit=N&offset=N (N from 1 to {MAX_LIMIT}, default {DEFAULT_LIMIT}; offset from 0) for pending "
    "tickets and ?undelivered_limit=N&undelivered_offset=N for decisions not delivered yet; each answer's "
    "pending_page.next_offset is where the next page starts."
)


def inbox_paging(request: Request) -> dict[str, int]:
    """GET /api/approvals's query string, checked: a 422 names a wrong parameter and the fix."""
    query = request.query_params
    try:
        for name in query:
            if name not in INBOX_QUERY:
                raise PagingError(name, f"Unknown query parameter {name!r}.")
            if len(query.getlist(name)) > 1:
                raise PagingError(name, f"{name} is given more than once.")
        return {
            "limit": parse_limit(query.get("limit")),
            "offset": parse_offset(query.get("offset")),
            "undelivered_limit": parse_limit(query.get("undelivered_limit"), "undelivered_limit"),
            "undelivered_offset": parse_offset(query.get("undelivered_offset"), "undelivered_offset"),
        }
    except PagingError as error:
        raise ApiError(422, "invalid_query", str(error), PAGING_FIX) from None


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


async def _sweep_forever(database_url: str, interval: float) -> None:
    """Expire overdue tickets and deliver what conversations are owed, every `interval` seconds.

    Safe with several replicas: each delivery takes the conversation's lock
    and checks the ledger again under it, so each decision arrives once.
    """
    while True:
        await asyncio.sleep(interval)
        try:
            await deliver_due(get_ledger(database_url), app_database_url=database_url, actor="expiry sweep")
        except Exception:
            logger.warning("The expiry sweep failed; it runs again in %s s", interval, exc_info=True)


def create_app(*, host: str = "127.0.0.1", port: int = 8000) -> FastAPI:
    """ADK's dev UI and API for this package, plus the approver inbox and its API."""
    settings = load_settings()
    database_url = settings.database_url
    # One tuned session service (WAL and a busy timeout on SQLite, shared with
    # the ledger's file) for ADK's routes and for delivering decisions.
    # ADK looks the URL's scheme up in its service registry - the documented
    # hook for custom session services - before building its own.
    sessions = runtime.GuardedSessionService(database_url)

    def shared_sessions(uri: str, **kwargs: Any) -> DatabaseSessionService:
        return sessions

    get_service_registry().register_session_service(urlparse(database_url).scheme, shared_sessions)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        runtime.adopt_session_service(database_url, sessions)
        sweeper = asyncio.create_task(_sweep_forever(database_url, settings.sweep_interval.total_seconds()))
        yield
        sweeper.cancel()
        await runtime.close_runtime()

    app = get_fast_api_app(
        agents_dir=str(PACKAGE_DIR.parent),
        # A loader for this one package: the app list shows long_running_agent
        # only, whatever else (tests, benchmarks, docs) sits in the repo root.
        agent_loader=AgentLoader(str(PACKAGE_DIR)),
        session_service_uri=database_url,
        artifact_service_uri="memory://",
        # PRODUCTION_MODE serves no dev UI (and web_gate.py closes ADK's /dev routes).
        web=not settings.production,
        host=host,
        port=port,
        # ADK turns on DNS-rebinding protection for a loopback bind, and warns
        # that its own routes have no authentication for any other.
        bind_host=host,
        lifespan=lifespan,
    )
    app.add_middleware(Gate, settings=settings)
    app.add_middleware(JsonErrors)  # outermost: even the gate answers JSON if it fails
    _replace_health(app, database_url)
    add_inbox(app, database_url)
    return app


def _replace_health(app: FastAPI, database_url: str) -> None:
    """ADK's /health always says ok; this one asks the database."""
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) != "/health"]

    @app.get("/health")
    async def health() -> JSONResponse:
        try:
            await asyncio.wait_for(get_ledger(database_url).ping(), timeout=5)
        except Exception as error:
            return JSONResponse({"status": "unavailable", "database": f"unreachable: {type(error).__name__}"},
                                status_code=503)
        return JSONResponse({"status": "ok", "database": "ok"})


def add_inbox(app: FastAPI, database_url: str) -> None:
    """Mount the inbox page and the approvals API on ADK's app."""

    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, error: ApiError) -> JSONResponse:
        return error.response()

    @app.exception_handler(InputError)
    async def _bad_input(_request: Request, error: InputError) -> JSONResponse:
        code = "invalid_body" if error.field == "reason" else "invalid_input"
        if error.field == "reason" and "needs a reason" in str(error):
            code = "reason_required"
        return ApiError(422, code, str(error), f"Correct the {error.field} and send it again.").response()

    @app.exception_handler(runtime.ConversationInUse)
    async def _in_use(_request: Request, error: runtime.ConversationInUse) -> JSONResponse:
        return ApiError(
            409, "conversation_in_use",
            f"This conversation cannot be deleted: {error}. Its decision has to reach it first.",
            "Wait until the tickets are decided and delivered (GET /api/approvals/{id}), then delete it.",
        ).response()

    @app.exception_handler(DBAPIError)
    async def _database_down(request: Request, error: DBAPIError) -> JSONResponse:
        return database_unavailable(request, error).response()

    @app.exception_handler(OSError)
    async def _database_unreachable(request: Request, error: OSError) -> JSONResponse:
        return database_unavailable(request, error).response()

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
            return unexpected_error(error).response()
        return ApiError(
            400, "invalid_function_response", str(error),
            "Answer only a pending call, with its id: the event whose longRunningToolIds lists it "
            "(GET /apps/{app}/users/{user}/sessions/{session}). Approvals themselves are decided "
            "with POST /api/approvals/{ticket_id}/approve or /reject, not over /run.",
        ).response()

    # The page's CSP, X-Frame-Options and friends (security_headers.py), on
    # every answer of /inbox and /api/approvals, errors included.
    app.add_middleware(SecurityHeaders)

    def packaged(name: str) -> str:
        return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")

    @app.get("/inbox", response_class=HTMLResponse, include_in_schema=False)
    async def inbox_page() -> HTMLResponse:
        return HTMLResponse(packaged("inbox.html"), headers={"Cache-Control": "no-store"})

    # The page's script and styles are files, not inline, so its CSP can allow 'self' only.
    @app.get("/inbox/inbox.js", include_in_schema=False)
    async def inbox_script() -> Response:
        return Response(packaged("inbox.js"), media_type="text/javascript", headers={"Cache-Control": "no-cache"})

    @app.get("/inbox/inbox.css", include_in_schema=False)
    async def inbox_styles() -> Response:
        return Response(packaged("inbox.css"), media_type="text/css", headers={"Cache-Control": "no-cache"})

    @app.get("/api/approvals")
    async def list_approvals(request: Request, approver: str = Depends(current_approver)) -> dict[str, Any]:
        paging = inbox_paging(request)
        ledger = get_ledger(database_url)
        await ledger.expire_due()
        pending = await ledger.list_tickets(limit=paging["limit"], offset=paging["offset"])
        total_pending = await ledger.count()
        # Every decision that has not reached its conversation, however old, with its Deliver action.
        undelivered = await ledger.undelivered(limit=paging["undelivered_limit"], offset=paging["undelivered_offset"])
        total_undelivered = await ledger.count_undelivered()
        return {
            "approver": approver,
            "pending": [ticket_json(t) for t in pending],
            "total_pending": total_pending,
            "pending_page": Page(paging["offset"], paging["limit"], total_pending, len(pending)).as_json(),
            "undelivered": [ticket_json(t) for t in undelivered],
            "total_undelivered": total_undelivered,
            "undelivered_page": Page(
                paging["undelivered_offset"], paging["undelivered_limit"], total_undelivered, len(undelivered)
            ).as_json(),
            "recent_decisions": [ticket_json(t) for t in await ledger.recent_decisions(limit=10)],
        }

    async def find(ledger: Ledger, ticket_id: str) -> Ticket:
        try:
            return await ledger.get(ticket_id)
        except LedgerError as error:
            raise await _ledger_error(ledger, error, ticket_id) from None

    @app.get("/api/approvals/{ticket_id}")
    async def show_approval(ticket_id: str, _approver: str = Depends(current_approver)) -> dict[str, Any]:
        ledger = get_ledger(database_url)
        ticket = await find(ledger, ticket_id)
        return {
            "ticket": ticket_json(ticket),
            "audit": [audit_json(e) for e in await ledger.audit(ticket_id)],
            "payouts": [payout_json(p) for p in await ledger.payouts(ticket_id=ticket_id)],
        }

    async def outcome(ledger: Ledger, delivery: Delivery) -> dict[str, Any]:
        ticket_id = delivery.ticket.id
        return {
            "ticket": ticket_json(await ledger.get(ticket_id)),
            "payouts": [payout_json(p) for p in await ledger.payouts(ticket_id=ticket_id)],
            "agent_reply": agent_reply(delivery.events),
            "delivery": delivery.outcome.value,
        }

    async def decide(ticket_id: str, approver: str, approve: bool, reason: str | None) -> JSONResponse:
        ledger = get_ledger(database_url)
        try:
            # The ledger first (a conditional UPDATE: one decision wins), then
            # the conversation, resumed with the stored call id and name.
            delivery = await decide_and_deliver(
                ledger, ticket_id, approver=approver, approve=approve, reason=reason,
                app_database_url=database_url,
            )
        except LedgerError as error:
            raise await _ledger_error(ledger, error, ticket_id) from None
        body = await outcome(ledger, delivery)
        if delivery.delivered:
            return JSONResponse(body)
        # Recorded, not delivered: 202, with what stands in the way and the fix.
        return JSONResponse(body | {"delivery_error": delivery_error(delivery).body()}, status_code=202)

    @app.post("/api/approvals/{ticket_id}/approve")
    async def approve(
        ticket_id: str, body: Decision | None = None, approver: str = Depends(current_approver)
    ) -> JSONResponse:
        reason = body.reason.strip() if body and body.reason else None
        return await decide(ticket_id, approver, True, reason or None)

    @app.post("/api/approvals/{ticket_id}/reject")
    async def reject(
        ticket_id: str, body: Decision | None = None, approver: str = Depends(current_approver)
    ) -> JSONResponse:
        reason = (body.reason or "").strip() if body else ""
        if not reason:
            raise ApiError(
                422, "reason_required", "A rejection needs a reason; the requester is told it.",
                'Send JSON like {"reason": "not a business expense"}.',
            )
        return await decide(ticket_id, approver, False, reason)

    @app.post("/api/approvals/{ticket_id}/settle")
    async def settle(ticket_id: str, approver: str = Depends(current_approver)) -> dict[str, Any]:
        """Finish a decision that cannot reach its conversation: pay it (approved) or close it."""
        ledger = get_ledger(database_url)
        await find(ledger, ticket_id)
        try:
            ticket, payout = await ledger.settle(ticket_id, approver=approver)
        except LedgerError as error:
            raise await _ledger_error(ledger, error, ticket_id) from None
        return {"ticket": ticket_json(ticket), "payouts": [payout_json(payout)] if payout else []}

    @app.post("/api/approvals/{ticket_id}/resume")
    async def redeliver(ticket_id: str, approver: str = Depends(current_approver)) -> dict[str, Any]:
        """Deliver a recorded decision whose delivery failed or whose process died."""
        ledger = get_ledger(database_url)
        await find(ledger, ticket_id)
        delivery = await deliver(ledger, ticket_id, app_database_url=database_url, actor=approver)
        if not delivery.delivered:
            raise delivery_error(delivery)
        return await outcome(ledger, delivery)


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
