"""The approver's routes: the inbox page and the approvals API (docs/http-api.md shows each with curl)."""

from __future__ import annotations

import hmac
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from ..delivery.courier import Courier, Delivery
from ..desk import Desk
from ..ledger import Ledger
from ..names import Outcome
from ..paging import DEFAULT_LIMIT, MAX_LIMIT, MAX_OFFSET, Page
from .api_errors import ApiError, problems, refusal_error
from .views import agent_reply, audit_json, notification_json, payout_json, ticket_json


async def the_desk(request: Request) -> Desk:
    """The server's desk (in the app's state); async: FastAPI runs a plain function off the engines' loop."""
    desk: Desk = request.app.state.desk
    return desk


TheDesk = Annotated[Desk, Depends(the_desk)]


async def the_courier(request: Request) -> Courier:
    """The server's courier (in the app's state): the one way a decision reaches its conversation."""
    courier: Courier = request.app.state.courier
    return courier


TheCourier = Annotated[Courier, Depends(the_courier)]


async def the_ledger(desk: TheDesk) -> Ledger:
    return desk.ledger


async def current_approver(request: Request, desk: TheDesk) -> str:
    """The approver named by the bearer token; tokens come from APPROVERS (name:token,...)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "missing_token", "This API needs an approver token.",
                       "Send the header 'Authorization: Bearer <token>'; tokens are set on the server in APPROVERS.")
    approvers = desk.settings.approvers
    for known, approver in approvers.items():
        if hmac.compare_digest(known.encode(), token.strip().encode()):
            return approver.name
    raise ApiError(403, "unknown_token",
                   "No approver has this token." if approvers else "No approvers are configured on this server.",
                   "Use the token your administrator gave you; they are set on the server as "
                   "APPROVERS=name:token,name:token (then restart it).")


Approver = Annotated[str, Depends(current_approver)]


async def the_channel(request: Request) -> str:
    """The surface a decision came through, for /metrics and its evidence: the inbox page says so in a header;
    anything else is the API."""
    return "inbox" if request.headers.get("x-approval-channel", "").strip().lower() == "inbox" else "api"


Channel = Annotated[str, Depends(the_channel)]
TheLedger = Annotated[Ledger, Depends(the_ledger)]


class InboxQuery(BaseModel):
    """GET /api/approvals's query: a page of pending tickets, and one of decisions not delivered yet."""

    model_config = ConfigDict(extra="forbid")
    limit: int = Field(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)
    undelivered_limit: int = Field(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    undelivered_offset: int = Field(0, ge=0, le=MAX_OFFSET)


async def one_value_each(request: Request, _approver: Approver) -> None:
    """FastAPI keeps the last of a repeated parameter; `?limit=5&limit=6` asks for two pages, so it is refused.

    After the approver's token, like every check of the query: a stranger learns nothing from it.
    """
    query = request.query_params
    if repeated := [name for name in query if len(query.getlist(name)) > 1]:
        raise RequestValidationError([
            {"type": "repeated", "loc": ("query", name), "msg": "given more than once", "input": query.getlist(name)}
            for name in repeated
        ])


def invalid_approvals_request(error: RequestValidationError) -> ApiError:
    """What FastAPI refuses of this API's requests: the list's query (InboxQuery) or a decision's body."""
    if all(e["loc"][0] == "query" for e in error.errors()):
        wrong = "; ".join(f"{e['loc'][-1]}: {e['msg']}" for e in error.errors())
        return ApiError(422, "invalid_query", f"The query is not valid: {wrong}.",
                        f"Page with ?limit=N&offset=N (N from 1 to {MAX_LIMIT}, default {DEFAULT_LIMIT}; offset from "
                        "0) for pending tickets and ?undelivered_limit=N&undelivered_offset=N for decisions not "
                        "delivered yet; each answer's pending_page.next_offset is where the next page starts.")
    return ApiError(422, "invalid_body", f"The request body is not valid: {problems(error.errors(), within='body')}.",
                    'Send JSON like {"reason": "not a business expense"} (reason: text, at most 500 characters; '
                    'required to reject), or no body to approve; to approve less than was asked, {"amount": 200, '
                    '"reason": "..."}; "shown": the ticket\'s shown_sha256, to refuse a decision on a changed ticket.')


class Decision(BaseModel):
    """Body of approve and reject."""

    model_config = ConfigDict(extra="forbid")
    reason: str | None = None
    # Approve less than was asked. Any JSON value: the one amount rule (ledger/inputs.py), as for the CLI's --amount,
    # gives 1e308, 10**40, NaN or "--5" a 422 invalid_amount, never a 500; as a number, pydantic would read true as 1.
    amount: Any = None
    # The ticket's `shown_sha256` as the approver saw it: a decision on anything else is refused (409 not_as_shown).
    shown: str | None = Field(default=None, max_length=64)


approvals = APIRouter(prefix="/api/approvals")


@approvals.get("", dependencies=[Depends(one_value_each)])
async def list_approvals(approver: Approver, ledger: TheLedger, page: Annotated[InboxQuery, Query()]) -> dict[str, Any]:
    # Every decision that has not reached its conversation is listed, however old, so the page can offer Deliver.
    inbox = await ledger.inbox.read(**page.model_dump())
    now = inbox.now
    failed_at = await ledger.deliveries.failures([t.id for t in inbox.undelivered if t.delivery_error])
    return {
        "approver": approver,
        "pending": [ticket_json(t, now, day=inbox.days.get(t.id)) for t in inbox.pending],
        "total_pending": inbox.total_pending,
        "pending_page": Page(page.offset, page.limit, inbox.total_pending, len(inbox.pending)).as_json(),
        "undelivered": [ticket_json(t, now, failed_at) for t in inbox.undelivered],
        "total_undelivered": inbox.total_undelivered,
        "undelivered_page": Page(page.undelivered_offset, page.undelivered_limit, inbox.total_undelivered,
                                 len(inbox.undelivered)).as_json(),
        "recent_decisions": [ticket_json(t, now) for t in inbox.recent_decisions],
    }


@approvals.get("/{ticket_id}")
async def show_approval(ticket_id: str, _approver: Approver, ledger: TheLedger) -> dict[str, Any]:
    ticket = await ledger.tickets.get(ticket_id)
    return {
        "ticket": ticket_json(ticket, ledger.now(), await ledger.deliveries.failures([ticket.id]),
                              (await ledger.tickets.requester_days([ticket]))[ticket.id]),
        "audit": [audit_json(e) for e in await ledger.tickets.audit(ticket_id)],
        "payouts": [payout_json(p) for p in await ledger.payouts.find(ticket_id=ticket_id)],
        "notifications": [notification_json(n) for n in await ledger.outbox.of_ticket(ticket_id)],
    }


@approvals.get("/{ticket_id}/evidence")
async def show_evidence(ticket_id: str, _approver: Approver, ledger: TheLedger) -> dict[str, Any]:
    """The ticket's request, policy tier, decisions with evidence, payouts, audit chain (ledger/audit/evidence.py)."""
    return await ledger.evidence(ticket_id)


async def delivery_json(ledger: Ledger, delivery: Delivery) -> dict[str, Any]:
    ticket_id = delivery.ticket.id
    ticket = await ledger.tickets.get(ticket_id)
    failed_at = await ledger.deliveries.failures([ticket_id]) if ticket.delivery_error else {}
    return {
        "ticket": ticket_json(ticket, ledger.now(), failed_at),
        "payouts": [payout_json(p) for p in await ledger.payouts.find(ticket_id=ticket_id)],
        "agent_reply": agent_reply(delivery.events),
        "delivery": delivery.outcome.value,
    }


def principal_of(request: Request, desk: Desk, approver: str) -> dict[str, str]:
    """Who the request authenticated as, for the decision's evidence: the token's approver, and the proxy's user."""
    principal = {"token_of": approver}
    header = desk.settings.trusted_user_header
    if header is not None and (user := request.headers.get(header)) is not None:
        principal["trusted_user"] = user[:200]
    return principal


async def record_decision(request: Request, courier: Courier, ticket_id: str, approver: str, approve: bool,
                          decision: Decision | None, channel: str) -> JSONResponse:
    # The ledger first (one conditional UPDATE wins), then the conversation, resumed with the stored call id and name.
    decision = decision or Decision()
    desk = courier.desk
    delivery = await courier.decide(ticket_id, approver=approver, approve=approve, reason=decision.reason,
                                    amount=decision.amount, channel=channel,
                                    principal=principal_of(request, desk, approver), shown=decision.shown)
    body = await delivery_json(desk.ledger, delivery)
    if delivery.delivered or delivery.outcome is Outcome.WAITING:
        return JSONResponse(body)
    return JSONResponse(body | {"delivery_error": refusal_error(delivery.refusal).body()}, status_code=202)


@approvals.post("/{ticket_id}/approve")
async def approve(request: Request, ticket_id: str, approver: Approver, courier: TheCourier, channel: Channel,
                  body: Decision | None = None) -> JSONResponse:
    return await record_decision(request, courier, ticket_id, approver, True, body, channel)


@approvals.post("/{ticket_id}/reject")
async def reject(request: Request, ticket_id: str, approver: Approver, courier: TheCourier, channel: Channel,
                 body: Decision | None = None) -> JSONResponse:
    return await record_decision(request, courier, ticket_id, approver, False, body, channel)


@approvals.post("/{ticket_id}/deliver")
async def deliver_decision(ticket_id: str, approver: Approver, courier: TheCourier) -> dict[str, Any]:
    """Deliver a recorded decision whose delivery failed or whose process died."""
    await courier.desk.ledger.tickets.get(ticket_id)
    delivery = await courier.deliver(ticket_id, actor=approver)
    if not delivery.delivered:
        raise refusal_error(delivery.refusal)
    return await delivery_json(courier.desk.ledger, delivery)


@approvals.post("/{ticket_id}/settle")
async def settle(ticket_id: str, approver: Approver, ledger: TheLedger) -> dict[str, Any]:
    """Finish a decision that cannot reach its conversation: pay it (approved) or close it."""
    ticket, payout = await ledger.deliveries.settle(ticket_id, approver=approver)
    return {"ticket": ticket_json(ticket, ledger.now()), "payouts": [payout_json(payout)] if payout else []}


inbox = APIRouter(prefix="/inbox", include_in_schema=False)


def _packaged(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


@inbox.get("", response_class=HTMLResponse)
async def inbox_page() -> HTMLResponse:
    return HTMLResponse(_packaged("inbox.html"), headers={"Cache-Control": "no-store"})


# The page's script and styles are files, not inline, so its CSP can allow 'self' only.
@inbox.get("/inbox.js")
async def inbox_script() -> Response:
    return Response(_packaged("inbox.js"), media_type="text/javascript", headers={"Cache-Control": "no-cache"})


@inbox.get("/inbox.css")
async def inbox_styles() -> Response:
    return Response(_packaged("inbox.css"), media_type="text/css", headers={"Cache-Control": "no-cache"})
