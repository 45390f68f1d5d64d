"""Webhooks for approvers: each notification in the outbox POSTed, signed, retried until it is sent.

The ledger writes a notification with every ticket event (ledger/outbox.py);
`send_due` claims the ones that are due and POSTs them to
APPROVAL_WEBHOOK_URL. `make web` runs it every couple of seconds, each
approver command once, and `send_soon` right after the agent opens or
withdraws a ticket (so plain `adk web` and `adk run` notify at once too).

The body is JSON with a human `text` (so a Slack incoming webhook shows it
as is), the event's `id`, its `type`, the ticket, and `timestamp`: the time
of this attempt, in Unix seconds. It is signed with HMAC-SHA256 under
APPROVAL_WEBHOOK_SECRET over the raw body:

    X-Signature-256: sha256=<hex digest>

A receiver checks the signature, refuses a `timestamp` more than a few
minutes old, and drops an `id` it has seen (a notification is sent at least
once). docs/notifications.md has a receiver in a dozen lines of Python.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx

from .ledger import Ledger, Notification
from .services import services
from .settings import Settings

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Signature-256"
# Connecting and each read: a receiver that hangs is a failed attempt, retried later.
TIMEOUT = httpx.Timeout(10.0)
# Who holds a claim: this process (replicas on one database each have their own).
HOLDER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


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


async def send_due(ledger: Ledger, settings: Settings, client: httpx.AsyncClient | None = None) -> list[Attempt]:
    """POST every notification that is due; returns what happened to each. Nothing to do without a URL."""
    if settings.webhook_url is None or settings.webhook_secret is None:
        return []
    attempts = []
    async with _client(client) as http:
        while claimed := await ledger.claim_due(HOLDER):
            for notification in claimed:
                attempts.append(await _send(ledger, settings.webhook_url, settings.webhook_secret, http,
                                            notification))
            if any(not a.sent for a in attempts[-len(claimed):]):
                break  # the receiver is failing: the rest waits for the next round
    return attempts


def send_soon() -> None:
    """Send what is due in the background of the running loop, if a webhook is set.

    Never delays the caller (a tool), and never fails it: a notification
    that is not sent now waits in the outbox for the next sender.
    """
    app = services()
    if app.settings.webhook_url is not None:
        app.in_background(_send_quietly(app.ledger, app.settings))


async def _send_quietly(ledger: Ledger, settings: Settings) -> None:
    try:
        await send_due(ledger, settings)
    except Exception:
        logger.warning("Sending notifications failed; the next sender retries them", exc_info=True)


async def _send(ledger: Ledger, url: str, secret: str, http: httpx.AsyncClient,
                notification: Notification) -> Attempt:
    payload = json.loads(notification.payload)
    payload["timestamp"] = int(ledger.now().timestamp())
    body = json.dumps(payload, separators=(",", ":")).encode()
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: sign(secret, body),
        "X-Webhook-Id": notification.id,
        "X-Webhook-Timestamp": str(payload["timestamp"]),
    }
    try:
        response = await http.post(url, content=body, headers=headers)
        if response.is_success:
            await ledger.mark_sent(notification.id, HOLDER)
            return Attempt(notification, sent=True)
        error = f"HTTP {response.status_code} from the receiver: {response.text[:200]}"
    except httpx.HTTPError as failure:
        error = f"{type(failure).__name__}: {failure}" if str(failure) else type(failure).__name__
    updated = await ledger.mark_failed_attempt(notification, HOLDER, error)
    if updated.failed_at:
        logger.warning("Gave up on notification %s (%s) after %s attempts: %s",
                       notification.id, notification.event, updated.attempts, error)
    return Attempt(notification, sent=False, error=error)


@contextlib.asynccontextmanager
async def _client(given: httpx.AsyncClient | None) -> AsyncIterator[httpx.AsyncClient]:
    """The given client, or a new one for this round, closed after it."""
    if given is not None:
        yield given
        return
    async with httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False) as own:
        yield own
