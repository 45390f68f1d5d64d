"""The approver's routes: the inbox page and the approvals API.

Every /api route needs `Authorization: Bearer <token>` (tokens from
APPROVERS; a missing token is 401, an unknown one 403):

    GET  /api/approvals                        pending tickets (?limit=&offset=), decisions not
                                               delivered yet (?undelivered_limit=&undelivered_offset=),
                                               recent decisions
    GET  /api/approvals/{ticket_id}            one ticket, its audit trail, payouts and notifications
    POST /api/approvals/{ticket_id}/approve    body optional: {"reason": "..."}; to approve less than
                                               was asked: {"amount": 200, "reason": "..."}
    POST /api/approvals/{ticket_id}/reject     body required: {"reason": "..."}
    POST /api/approvals/{ticket_id}/deliver    deliver a recorded decision (after a failure)
    POST /api/approvals/{ticket_id}/settle     pay (or close) a decision whose conversation is gone
"""

from __future__ import annotations

import hmac
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict

from ..approval.delivery import Delivery, Outcome, decide_and_deliver, deliver
from ..ledger import Ledger
from ..paging import DEFAULT_LIMIT, MAX_LIMIT, Page, PagingError, parse_limit, parse_offset
from ..services import services
from .errors import ApiError, refusal_error
from .views import agent_reply, audit_json, notification_json, payout_json, ticket_json


async def the_ledger() -> Ledger:
    # async: FastAPI runs plain functions in a thread, away from the loop the engines belong to
    return services().ledger


async def current_approver(request: Request) -> str:
    """The approver named by the bearer token; tokens come from APPROVERS (name:token,...)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(
            401, "missing_token", "This API needs an approver token.",
            "Send the header 'Authorization: Bearer <token>'; tokens are set on the server in APPROVERS.",
        )
    approvers = services().settings.approvers
    for known, name in approvers.items():
        if hmac.compare_digest(known.encode(), token.strip().encode()):
            return name
    raise ApiError(
        403, "unknown_token",
        "No approver has this token." if approvers else "No approvers are configured on this server.",
        "Use the token your administrator gave you; they are set on the server as "
        "APPROVERS=name:token,name:token (then restart it).",
    )


Approver = Annotated[str, Depends(current_approver)]
TheLedger = Annotated[Ledger, Depends(the_ledger)]

INBOX_QUERY = ("limit", "offset", "undelivered_limit", "undelivered_offset")
PAGING_FIX = (
    f"Page with ?limit=N&offset=N (N from 1 to {MAX_LIMIT}, default {DEFAULT_LIMIT}; offset from 0) for pending "
    "tickets and ?undelivered_limit=N&undelivered_offset=N for decisions not delivered yet; each answer's "
    "pending_page.next_offset is where the next page starts."
)


async def inbox_paging(request: Request) -> dict[str, int]:
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


class Decision(BaseModel):
    """Body of approve and reject."""

    model_config = ConfigDict(extra="forbid")
    reason: str | None = None
    # Approve less than was asked (approve only). Any JSON value: the ledger
    # applies the one amount rule (ledger/inputs.py), as for the CLI's --amount,
    # so 1e308, 10**40, NaN or "--5" get a 422 invalid_amount, never a 500.
    # Not typed as a number: pydantic would read true as 1.
    amount: Any = None


approvals = APIRouter(prefix="/api/approvals")


@approvals.get("")
async def list_approvals(
    approver: Approver, ledger: TheLedger, paging: Annotated[dict[str, int], Depends(inbox_paging)]
) -> dict[str, Any]:
    # The read `python main.py inbox` makes too (ledger/inbox.py). Every decision that has not
    # reached its conversation is listed, however old, so the page can offer its Deliver action.
    inbox = await ledger.inbox.read(**paging)
    now = inbox.now
    failed_at = await ledger.deliveries.failures([t.id for t in inbox.undelivered if t.delivery_error])
    return {
        "approver": approver,
        "pending": [ticket_json(t, now) for t in inbox.pending],
        "total_pending": inbox.total_pending,
        "pending_page": Page(paging["offset"], paging["limit"], inbox.total_pending, len(inbox.pending)).as_json(),
        "undelivered": [ticket_json(t, now, failed_at) for t in inbox.undelivered],
        "total_undelivered": inbox.total_undelivered,
        "undelivered_page": Page(
            paging["undelivered_offset"], paging["undelivered_limit"], inbox.total_undelivered,
            len(inbox.undelivered),
        ).as_json(),
        "recent_decisions": [ticket_json(t, now) for t in inbox.recent_decisions],
    }


@approvals.get("/{ticket_id}")
async def show_approval(ticket_id: str, _approver: Approver, ledger: TheLedger) -> dict[str, Any]:
    ticket = await ledger.tickets.get(ticket_id)
    return {
        "ticket": ticket_json(ticket, ledger.now(), await ledger.deliveries.failures([ticket.id])),
        "audit": [audit_json(e) for e in await ledger.tickets.audit(ticket_id)],
        "payouts": [payout_json(p) for p in await ledger.payouts.find(ticket_id=ticket_id)],
        # Webhooks about it (APPROVAL_WEBHOOK_URL): sent, retrying, or failed for good.
        "notifications": [notification_json(n) for n in await ledger.outbox.of_ticket(ticket_id)],
    }


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


async def record_decision(
    ledger: Ledger, ticket_id: str, approver: str, approve: bool, decision: Decision | None
) -> JSONResponse:
    # The ledger first (a conditional UPDATE: one decision wins), then the
    # conversation, resumed with the stored call id and name.
    decision = decision or Decision()
    delivery = await decide_and_deliver(ticket_id, approver=approver, approve=approve, reason=decision.reason,
                                        amount=decision.amount)
    body = await delivery_json(ledger, delivery)
    if delivery.delivered or delivery.outcome is Outcome.WAITING:
        # WAITING: the first of two approvals is recorded; a second approver decides.
        return JSONResponse(body)
    # Recorded, not delivered: 202, with what stands in the way and the fix.
    return JSONResponse(body | {"delivery_error": refusal_error(delivery.refusal).body()}, status_code=202)


@approvals.post("/{ticket_id}/approve")
async def approve(ticket_id: str, approver: Approver, ledger: TheLedger, body: Decision | None = None) -> JSONResponse:
    return await record_decision(ledger, ticket_id, approver, True, body)


@approvals.post("/{ticket_id}/reject")
async def reject(ticket_id: str, approver: Approver, ledger: TheLedger, body: Decision | None = None) -> JSONResponse:
    return await record_decision(ledger, ticket_id, approver, False, body)


@approvals.post("/{ticket_id}/deliver")
async def deliver_decision(ticket_id: str, approver: Approver, ledger: TheLedger) -> dict[str, Any]:
    """Deliver a recorded decision whose delivery failed or whose process died."""
    await ledger.tickets.get(ticket_id)
    delivery = await deliver(ticket_id, actor=approver)
    if not delivery.delivered:
        raise refusal_error(delivery.refusal)
    return await delivery_json(ledger, delivery)


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
