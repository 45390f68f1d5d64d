"""POST /slack/actions: what a click or a form in Slack does, once, as the approver it maps to.

Slack wants an answer within three seconds, so the decision and its delivery run behind it. Before answering, the
decision asked for is kept with the request's signature (`slack_requests`, which also refuses a replay) and the
message's update is written to the outbox: a server that dies after answering leaves both for the next one's
sweep (`decide_left_over`). The whole story: docs/slack.md.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs

from pydantic import ValidationError
from slack_sdk.signature import Clock, SignatureVerifier
from sqlalchemy import delete, or_, select, update
from sqlalchemy.exc import IntegrityError

from ..ledger import Ticket, TicketNotFound, TicketStatus, inputs
from ..ledger.storage.schema import SlackRequestRow
from ..names import Outcome
from ..outbound import refused_url
from ..refusals import Actions, Refusal
from ..refusals.values import InputError
from ..settings import SLACK_HOSTS
from . import forms, payloads
from .messages import AMOUNT, APPROVE, APPROVE_LESS, IN_INBOX, REASON, REJECT, SLACK_REPLY, SLACK_UPDATE, ephemeral
from .payloads import Click, FormTarget, Submission

if TYPE_CHECKING:
    from ..desk import Desk


class Decided(Protocol):
    """What a decision's delivery tells a click's work (delivery/courier.py's Delivery)."""

    @property
    def delivered(self) -> bool: ...
    @property
    def outcome(self) -> Outcome: ...
    @property
    def refusal(self) -> Refusal: ...


# What the server hands SlackActions: the courier's `decide` and the outbox's `send_due`
# (this package sits below both: the outbox's sender renders Slack's messages with it).
Decide = Callable[..., Awaitable[Decided]]
Send = Callable[..., Awaitable[object]]

logger = logging.getLogger(__name__)

# Slack's own rule: a request whose timestamp is further than this from now is refused.
MAX_AGE = timedelta(minutes=5)
# A request may be signed up to five minutes ahead of this server's clock or behind it, so its signature can come
# back for up to ten minutes after it first came.
KEEP_SIGNATURES = MAX_AGE * 2
# A message's update waits this long for the click's own decision before any sender may take it (the decision
# takes milliseconds; the click's work sends it as soon as it is done).
HOLD = timedelta(seconds=30)
# A decision asked for and not made this long after (its server died) is made by the sweep: longer than a decision
# and its delivery take (a busy conversation is waited for up to a minute); were both to run, the ledger decides once.
LEFT_OVER = timedelta(minutes=2)

SLACK = Actions(
    inbox="the inbox page", show="the inbox page", deliver="Deliver on the inbox page",
    decide="Approve or Reject", approve="another approver clicks Approve", settle="Settle on the inbox page",
    approve_less="Approve less, with the amount and a reason", restart="restart the server",
)


class SlackRefused(Refusal):
    """A request to POST /slack/actions that is not taken: unsigned, forged, stale, replayed or unreadable."""

    def __init__(self, status: int, code: str, message: str, fix: str) -> None:
        super().__init__(message, next_step=fix, code=code)
        self.status = status


class _LedgerClock(Clock):
    """The app's clock (tests move it), for slack_sdk's five-minute rule."""

    def __init__(self, desk: Desk) -> None:
        self.desk = desk

    def now(self) -> float:
        return self.desk.ledger.now().timestamp()


def _stranger(user: str) -> str:
    return (f"Your Slack account ({user}) is not mapped to an approver here, so this did nothing. Ask an "
            f"administrator to add you to SLACK_APPROVERS (e.g. {user}:yourname, with yourname in APPROVERS).")


def _principal(payload: Click | Submission, approver: str) -> dict[str, str]:
    """Whom Slack's signed request names, the decision's evidence. No `shown`: the message's ticket is fixed when it
    is posted (an update replaces the whole message), so the click is on the ticket its id names."""
    return {"slack_user": payload.user.id, "slack_team": payload.team.id if payload.team else "none",
            "approver": approver}


class SlackActions:
    """What POST /slack/actions does: on the desk it is handed, deciding as `decide` does, sending with `send`."""

    def __init__(self, desk: Desk, *, decide: Decide, send: Send) -> None:
        self.desk, self.decide, self.send = desk, decide, send

    async def take(self, body: bytes, headers: dict[str, str]) -> dict[str, Any]:
        """The immediate answer to one request ({} for an empty 200); SlackRefused if it is not Slack's, or not new."""
        config = self.desk.settings
        assert config.slack_signing_secret is not None
        timestamp, signature = headers.get("x-slack-request-timestamp"), headers.get("x-slack-signature")
        if not timestamp or not signature:
            raise SlackRefused(401, "unsigned_request", "The request has no Slack signature.",
                               "Only Slack calls this URL: set it as the Interactivity Request URL of the Slack app.")
        now = self.desk.ledger.now()
        try:
            age = abs(now.timestamp() - int(timestamp))
        except ValueError:
            age = None
        if age is None or age > MAX_AGE.total_seconds():
            raise SlackRefused(401, "stale_request", "The request's X-Slack-Request-Timestamp is more than five "
                               "minutes from this server's time, so it may be a replay.",
                               "Check the server's clock (NTP); Slack's own requests are always fresh.")
        verifier = SignatureVerifier(config.slack_signing_secret, clock=_LedgerClock(self.desk))
        if not verifier.is_valid(body=body, timestamp=timestamp, signature=signature):
            raise SlackRefused(401, "invalid_signature", "The request's X-Slack-Signature does not match its body "
                               "under SLACK_SIGNING_SECRET.",
                               "Set SLACK_SIGNING_SECRET to the app's Signing Secret (Slack app settings > Basic "
                               "Information), then restart the server.")
        request = await self._remember(signature, now)
        try:
            payload = payloads.parse(parse_qs(body.decode())["payload"][0])
        except (ValueError, KeyError) as error:  # pydantic's ValidationError is a ValueError
            wrong = error.errors()[0] if isinstance(error, ValidationError) else None
            where = f" ({'.'.join(map(str, wrong['loc'])) or 'its JSON'}: {wrong['msg'][:100]})" if wrong else ""
            raise SlackRefused(400, "invalid_payload", f"The request has no Slack interaction payload of the shape "
                               f"Slack sends (form field `payload`, JSON){where}.",
                               "Send Slack's block_actions or view_submission payload.") from None
        if isinstance(payload, Click):
            return await self._clicked(payload, request)
        if isinstance(payload, Submission):
            return await self._submitted(payload, request)
        return {}  # e.g. a form closed: nothing to do

    async def _remember(self, signature: str, now: datetime) -> str:
        """Keep the signature; refuse it if it was kept already: the same request, sent again. Returns its id."""
        key = hashlib.sha256(signature.encode()).hexdigest()
        try:
            async with await self.desk.ledger.database.session() as db, db.begin():
                await db.execute(delete(SlackRequestRow).where(
                    SlackRequestRow.received_at < now - KEEP_SIGNATURES,
                    or_(SlackRequestRow.decision.is_(None), SlackRequestRow.done_at.is_not(None))))
                db.add(SlackRequestRow(id=key, received_at=now))
        except IntegrityError:
            raise SlackRefused(409, "replayed_request", "This exact request (same timestamp, body and signature) was "
                               "taken already; it is not taken twice.", "Nothing to do: the first one counted. Click "
                               "again in Slack for a new request.") from None
        return key

    def _follow(self, response_url: str) -> None:
        """Refuse a request whose answers would go anywhere but Slack (SLACK_RESPONSE_URL_HOSTS): nothing is decided."""
        hosts = self.desk.settings.slack_response_url_hosts
        if (why := refused_url(response_url, hosts, "SLACK_RESPONSE_URL_HOSTS")) is not None:
            raise SlackRefused(400, "response_url_not_allowed", f"The request's response_url is not followed: {why}.",
                               f"Slack's own are https://{SLACK_HOSTS[0]}/...; to take them through a proxy, list its "
                               "host in SLACK_RESPONSE_URL_HOSTS and restart the server.")

    def _approver(self, payload: Click | Submission) -> tuple[str | None, str]:
        """The approver who sent it (SLACK_APPROVERS), or None and what to tell a stranger or another workspace."""
        team, home = payload.team.id if payload.team else "none", self.desk.settings.slack_team_id
        if home is not None and team != home:
            return None, (f"This Slack workspace ({team}) is not the one this server takes approvals from "
                          f"(SLACK_TEAM_ID={home}), so this did nothing; decide from that workspace.")
        return self.desk.settings.slack_approvers.get(payload.user.id), _stranger(payload.user.id)

    async def _clicked(self, payload: Click, request: str) -> dict[str, Any]:
        [action, *_], response_url = payload.actions, payload.response_url
        action_id, ticket_id = action.action_id, action.value
        if response_url is not None:
            self._follow(response_url)
        if action_id.endswith(IN_INBOX) or not response_url:
            return {}  # a link to the inbox: the browser opens it
        approver, refusal = self._approver(payload)
        if approver is None:
            await self._reply(ticket_id, response_url, refusal)
            return {}
        try:
            ticket = await self.desk.ledger.tickets.get(ticket_id)
        except TicketNotFound as refusal:
            await self._reply(ticket_id, response_url, refusal.sentence(SLACK))
            return {}
        if action_id == APPROVE:
            await self._ask(request, ticket_id, response_url, {"approver": approver, "approve": True,
                                                               "principal": _principal(payload, approver)})
        elif action_id in (REJECT, APPROVE_LESS):
            if ticket.status is not TicketStatus.PENDING:
                await self._update_now(ticket_id, response_url)  # decided elsewhere: the message shows how
            else:
                self.desk.in_background(self._open_form(action_id, ticket, payload.trigger_id, response_url))
        return {}

    async def _submitted(self, payload: Submission, request: str) -> dict[str, Any]:
        """A Reject or Approve less form, sent: what was written is checked here, the decision is made behind."""
        try:
            target = FormTarget.model_validate_json(payload.view.private_metadata)
        except ValueError:
            return {}  # not one of this app's forms
        kind, ticket_id, response_url = payload.view.callback_id, target.ticket, target.response_url
        if kind not in (REJECT, APPROVE_LESS):
            return {}
        self._follow(response_url)
        approver, refusal = self._approver(payload)
        if approver is None:
            return {"response_action": "errors", "errors": {REASON: refusal[:150]}}
        written = payload.view.written()
        approve = kind == APPROVE_LESS
        try:
            ticket = await self.desk.ledger.tickets.get(ticket_id)
            # The ledger applies these rules again, behind the answer; checked here too, so that a mistake is shown
            # in the form, which stays open.
            inputs.reason(written[REASON], required=True, needed_by="Approving less" if approve else "A rejection")
            if approve and inputs.approved_cents(written[AMOUNT], ticket.amount_cents) > ticket.payable_cents:
                raise InputError("amount", f"{ticket.first_approved_by} approved {ticket.payable_text} of the "
                                 f"{ticket.amount_text} asked: approve that much or less, or reject.")
        except InputError as refusal:
            block = AMOUNT if refusal.field == "amount" else REASON
            return {"response_action": "errors", "errors": {block: refusal.message[:150]}}
        except TicketNotFound as refusal:
            return {"response_action": "errors", "errors": {REASON: refusal.message[:150]}}
        await self._ask(request, ticket_id, response_url, {
            "approver": approver, "approve": approve, "reason": written[REASON],
            "amount": written[AMOUNT] if approve else None, "principal": _principal(payload, approver)})
        return {}

    async def _open_form(self, kind: str, ticket: Ticket, trigger_id: str, response_url: str) -> None:
        failure = await forms.open_form(self.desk.settings, kind, ticket, trigger_id, response_url)
        if failure is not None:
            await self._reply(ticket.id, response_url, failure)

    async def _ask(self, request: str, ticket_id: str, response_url: str, decision: dict[str, Any]) -> None:
        """Keep the decision asked for, and the message's update, before Slack is answered; decide behind it."""
        ledger = self.desk.ledger
        async with await ledger.database.session() as db, db.begin():
            await db.execute(update(SlackRequestRow).where(SlackRequestRow.id == request).values(
                ticket_id=ticket_id, decision=json.dumps(decision | {"response_url": response_url})))
            message = ledger.outbox.add_message(db, ticket_id=ticket_id, event=SLACK_UPDATE,
                                                body={"response_url": response_url}, due=ledger.now() + HOLD)
        self.desk.in_background(self._decide(request, ticket_id, response_url, message, decision))

    async def _decide(self, request: str, ticket_id: str, response_url: str, message: str, decision: dict[str, Any], *,
                      quiet: bool = False) -> None:
        """The ledger's decision and its delivery, then the message's update; `quiet` (the sweep's): no reply."""
        ledger = self.desk.ledger
        try:
            delivery = await self.decide(ticket_id, **decision, channel="slack")
            if not delivery.delivered and delivery.outcome is not Outcome.WAITING and not quiet:
                # Decided, not delivered (the conversation is gone, say): what stands in the way, and the fix.
                await self._reply(ticket_id, response_url, delivery.refusal.sentence(SLACK), send=False)
        except Refusal as refusal:  # the requester, a second click, an expired ticket, ...: the ledger's words
            if not quiet:
                await self._reply(ticket_id, response_url, refusal.sentence(SLACK), send=False)
        except Exception:
            logger.exception("Deciding %s from Slack failed; the message shows the ticket as it stands", ticket_id)
        finally:
            async with await ledger.database.session() as db, db.begin():
                await db.execute(update(SlackRequestRow).where(SlackRequestRow.id == request,
                                                               SlackRequestRow.done_at.is_(None))
                                 .values(done_at=ledger.now()))
            await ledger.outbox.make_due(message)
            await self._send()

    async def decide_left_over(self) -> int:
        """Make the decisions asked for from Slack that a server answered but died before making; returns how many."""
        ledger = self.desk.ledger
        async with await ledger.database.session() as db:
            rows = list(await db.scalars(
                select(SlackRequestRow).where(SlackRequestRow.decision.is_not(None), SlackRequestRow.done_at.is_(None),
                                              SlackRequestRow.received_at <= ledger.now() - LEFT_OVER)
                .order_by(SlackRequestRow.received_at).limit(20)))
        for row in rows:
            asked = json.loads(row.decision or "{}")
            response_url = asked.pop("response_url")
            assert row.ticket_id is not None
            async with await ledger.database.session() as db, db.begin():
                message = ledger.outbox.add_message(db, ticket_id=row.ticket_id, event=SLACK_UPDATE,
                                                    body={"response_url": response_url}, due=ledger.now() + HOLD)
            await self._decide(row.id, row.ticket_id, response_url, message, asked, quiet=True)
        return len(rows)

    async def _update_now(self, ticket_id: str, response_url: str) -> None:
        ledger = self.desk.ledger
        async with await ledger.database.session() as db, db.begin():
            ledger.outbox.add_message(db, ticket_id=ticket_id, event=SLACK_UPDATE, body={"response_url": response_url},
                                      due=ledger.now())
        self.desk.in_background(self._send())

    async def _reply(self, ticket_id: str, response_url: str, text: str, *, send: bool = True) -> None:
        """A reply only the person who clicked sees, through the outbox (retried like any notification)."""
        ledger = self.desk.ledger
        async with await ledger.database.session() as db, db.begin():
            ledger.outbox.add_message(db, ticket_id=ticket_id, event=SLACK_REPLY,
                                      body={"response_url": response_url, "message": ephemeral(text)}, due=ledger.now())
        if send:
            self.desk.in_background(self._send())

    async def _send(self) -> None:
        try:
            await self.send(self.desk.ledger, self.desk.settings)
        except Exception:
            logger.warning("Sending Slack's replies failed; the server's sender retries them", exc_info=True)

