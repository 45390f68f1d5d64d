"""Webhooks for approvers: each notification in the outbox POSTed, signed, retried until it is sent.

The ledger writes a notification with every ticket event (ledger/outbox.py). Nobody waits on a receiver:
each attempt has one deadline for the whole request, attempts run side by side, and what is not sent in time
stays in the outbox for the next sender (docs/notifications.md; with Slack on, docs/slack.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import hmac
import json
import logging
import math
import os
import socket
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from .ledger import Ledger, Notification
from .ledger.outbox import A2A_PUSH, LEASE, MAX_ATTEMPTS
from .outbound import LOOPBACK, refused_url
from .settings import Settings
from .slack import replies
from .slack.messages import SLACK_REPLY, SLACK_UPDATE, Buttons, event_text, notification_blocks
from .slack.replies import PAYOUT_POLL

if TYPE_CHECKING:
    from .desk import Desk

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Signature-256"
# Attempts in flight at once in one round: a slow receiver takes one of them, not the sender.
CONCURRENT = 10
# While attempts are in flight, how often a draining round looks for newly due notifications.
POLL_SECONDS = 0.5
# Who holds a claim: this process (replicas on one database each have their own).
HOLDER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
# One TLS context for every round: making one reads the whole CA bundle, and the server sends a round every few
# seconds and after every ticket event.
_tls = functools.cache(httpx.create_ssl_context)


def sign(secret: str, body: bytes) -> str:
    """The X-Signature-256 value of `body`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, signature: str) -> bool:
    """What a receiver does: compare the signature of the raw body, in constant time."""
    return hmac.compare_digest(sign(secret, body), signature)


@dataclass(frozen=True)
class Attempt:
    notification: Notification
    sent: bool
    error: str | None = None
    # Not sent, and not a failure: what it reports is not ready yet (an approval not yet paid).
    postponed: bool = False

    @property
    def failed(self) -> bool:
        return not self.sent and not self.postponed


async def send_due(ledger: Ledger, settings: Settings, client: httpx.AsyncClient | None = None, *,
                   drain: bool = False) -> list[Attempt]:
    """POST the notifications that are due, up to CONCURRENT at once; returns what happened to each.

    A round ends within APPROVAL_WEBHOOK_TIMEOUT_SECONDS. With `drain` (the server), it claims again as
    attempts end and new notifications come due, until none is left, so a slow attempt takes one place,
    never the sender. Once an attempt fails, no more are claimed this round: the receiver is failing.
    """
    if (settings.webhook_url is None or settings.webhook_secret is None) and not settings.a2a_clients:
        return []
    only = () if settings.webhook_url is not None else (A2A_PUSH,)  # without a webhook: A2A pushes only
    deadline = settings.webhook_timeout.total_seconds()
    attempts: list[Attempt] = []
    held: dict[asyncio.Task[list[Attempt]], int] = {}  # each ticket's sender, and how many rows it holds
    claiming = True
    loop = asyncio.get_running_loop()
    round_ends = math.inf if drain else loop.time() + deadline
    async with (contextlib.nullcontext(client) if client is not None
                else httpx.AsyncClient(timeout=httpx.Timeout(deadline), follow_redirects=False, verify=_tls())) as http:
        buttons = Buttons.of(settings) if settings.slack else None
        post = _Poster(ledger, str(settings.webhook_url or ""), settings.webhook_secret or "", deadline, http, buttons,
                       settings.slack_response_url_hosts, LOOPBACK + settings.a2a_push_hosts)
        try:
            while True:
                free = CONCURRENT - sum(held.values())
                if claiming and free > 0:
                    # Every attempt ends while the claim is still ours: no other sender can take the row meanwhile.
                    ends = min(round_ends, loop.time() + LEASE.total_seconds())
                    for batch in _by_ticket(await ledger.outbox.claim_due(HOLDER, limit=free, events=only)):
                        held[asyncio.create_task(post.in_order(batch, ends))] = len(batch)
                    claiming = drain
                if not held:
                    return attempts
                done, _pending = await asyncio.wait(held, timeout=POLL_SECONDS if claiming else None,
                                                    return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    del held[task]
                    # A postponed reply was not tried: not the caller's business, nor a failure.
                    attempts += [attempt for attempt in task.result() if not attempt.postponed]
                if any(not attempt.sent for attempt in attempts):
                    claiming = False
        finally:
            # Cancelled (the server stopping): the claims lapse with their lease, and the rows are sent again.
            for task in held:
                task.cancel()
            await asyncio.gather(*held, return_exceptions=True)


def _by_ticket(claimed: list[Notification]) -> list[list[Notification]]:
    """The claimed rows by ticket, each ticket's oldest first (claim_due returns them oldest first)."""
    tickets: dict[str, list[Notification]] = {}
    for notification in claimed:
        tickets.setdefault(notification.ticket_id, []).append(notification)
    return list(tickets.values())


def send_soon(desk: Desk) -> None:
    """Send what is due in the background, if a webhook is set: it never delays or fails the caller (a tool)."""
    if desk.settings.webhook_url is not None:
        desk.in_background(_send_quietly(desk.ledger, desk.settings))


async def _send_quietly(ledger: Ledger, settings: Settings) -> None:
    try:
        await send_due(ledger, settings)
    except Exception:
        logger.warning("Sending notifications failed; the next sender retries them", exc_info=True)


@dataclass(frozen=True)
class _Poster:
    ledger: Ledger
    url: str
    secret: str
    deadline: float
    http: httpx.AsyncClient
    buttons: Buttons | None = None
    response_url_hosts: tuple[str, ...] = ()
    push_hosts: tuple[str, ...] = LOOPBACK

    async def in_order(self, batch: list[Notification], ends: float) -> list[Attempt]:
        """One ticket's notifications, one after another, so a receiver sees them in the order they happened.

        The first has the whole deadline; the next go while the ones before went through, in the time left
        before `ends` (the round's or the claim's end). One cut short by it goes back to the outbox untried.
        """
        attempts: list[Attempt] = []
        for number, notification in enumerate(batch):
            if not attempts:
                allowed = self.deadline
            elif attempts[-1].failed:
                allowed = 0.0  # the receiver is failing: the rest wait their turn, in order
            else:
                allowed = min(self.deadline, ends - asyncio.get_running_loop().time())
            attempt = await self.send(notification, allowed) if allowed > 0 else None
            if attempt is None:
                for left in batch[number:]:
                    await self.ledger.outbox.release_claim(left.id, HOLDER)
                break
            attempts.append(attempt)
        return attempts

    async def send(self, notification: Notification, allowed: float) -> Attempt | None:
        """POST it within `allowed` seconds; None if `allowed`, cut below the deadline, ran out (no attempt counted)."""
        with self.ledger.watch.step("outbox.send", ticket=notification.ticket_id) as step:
            attempt = await self._send(notification, allowed)
            step.note(event=notification.event)
            if attempt is not None and not attempt.postponed:
                step.note(sent=attempt.sent)
            return attempt

    async def _send(self, notification: Notification, allowed: float) -> Attempt | None:
        payload = json.loads(notification.payload)
        url = self.url
        if notification.event == A2A_PUSH:  # an A2A task's outcome, to the URL its client gave (a2a/)
            if refused := refused_url(payload["url"], self.push_hosts, "A2A_PUSH_HOSTS"):
                return await self._failed(notification, f"push URL not followed: {refused}", each=True)
            url, body = payload["url"], json.dumps(payload["task"], separators=(",", ":")).encode()
            headers = {"Content-Type": "application/json"} | (
                {"X-A2A-Notification-Token": payload["token"]} if payload.get("token") else {})
        elif notification.event in (SLACK_UPDATE, SLACK_REPLY):
            # Checked where it arrived too (slack/actions.py); a row written before that check is refused here.
            refused = refused_url(str(payload.get("response_url")), self.response_url_hosts,
                                  "SLACK_RESPONSE_URL_HOSTS")
            if refused is not None:
                return await self._failed(notification, f"response_url not followed: {refused}", each=True)
            message = await replies.reply(self.ledger, notification, payload, self.buttons)
            if message is None:
                await self.ledger.outbox.postpone(notification.id, HOLDER, self.ledger.now() + PAYOUT_POLL)
                return Attempt(notification, sent=False, postponed=True)
            url, body = payload["response_url"], json.dumps(message, separators=(",", ":")).encode()
            headers = {"Content-Type": "application/json"}
        else:
            payload["timestamp"] = int(self.ledger.now().timestamp())
            if payload["ticket"]["status"] == "pending":  # drawn now: approvers see the requester's day as it is
                payload["ticket"]["requester_today"] = await self.ledger.tickets.requester_today(notification.ticket_id)
            # Written by this release with the ticket only; by an earlier one, with its text.
            payload.setdefault("text", event_text(notification.event, payload["ticket"]))
            if self.buttons is not None:
                payload["blocks"] = notification_blocks(payload, self.buttons)
            body = json.dumps(payload, separators=(",", ":")).encode()
            headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(self.secret, body),
                       "X-Webhook-Id": notification.id, "X-Webhook-Timestamp": str(payload["timestamp"])}
        try:
            # httpx times each phase and each read afresh, so a receiver sending a byte every few seconds
            # never trips it; this deadline covers the whole attempt.
            async with asyncio.timeout(allowed):
                response = await self.http.post(url, content=body, headers=headers)
            if response.is_success:
                await self.ledger.outbox.mark_sent(notification.id, HOLDER)
                return Attempt(notification, sent=True)
            error = f"HTTP {response.status_code} from the receiver: {response.text[:200]}"
        except TimeoutError:
            if allowed < self.deadline:
                return None
            error = f"no complete answer within {self.deadline:g} s (APPROVAL_WEBHOOK_TIMEOUT_SECONDS)"
        except (httpx.HTTPError, httpx.InvalidURL) as failure:  # InvalidURL is no HTTPError
            error = f"{type(failure).__name__}: {failure}" if str(failure) else type(failure).__name__
        return await self._failed(notification, error)

    async def _failed(self, notification: Notification, error: str, *, each: bool = False) -> Attempt:
        """A failed attempt, counted; logged when it is the last, or with `each` (a URL this server will not use,
        until its settings change) every time."""
        updated = await self.ledger.outbox.mark_failed_attempt(notification, HOLDER, error)
        if updated.failed_at:
            logger.warning("Gave up on notification %s (%s) after %s attempts: %s",
                           notification.id, notification.event, updated.attempts, error)
        elif each:
            logger.warning("Notification %s (%s) not sent, attempt %s of %s: %s",
                           notification.id, notification.event, updated.attempts, MAX_ATTEMPTS, error)
        return Attempt(notification, sent=False, error=error)
