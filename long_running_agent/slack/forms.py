"""Reject and Approve less in Slack: a modal for the reason (and the amount), opened with views.open.

A click's `trigger_id` opens a modal within three seconds only, so this runs beside the click's answer;
slack_sdk's WebClient (urllib, no aiohttp) runs in a thread, at SLACK_API_URL.
"""

from __future__ import annotations

import asyncio
import logging

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from ..ledger import Ticket
from ..ledger.outbox import ticket_fields
from ..settings import Settings
from .messages import Buttons, decision_form

logger = logging.getLogger(__name__)

# Within the trigger's three seconds, with room for the answer.
TIMEOUT_SECONDS = 2


async def open_form(config: Settings, kind: str, ticket: Ticket, trigger_id: str, response_url: str) -> str | None:
    """Open the form of `kind` for `ticket`; None when it opened, else what to tell the person who clicked."""
    inbox = Buttons.of(config).link(ticket.id) if config.slack_inbox_url else None
    elsewhere = f"decide it on the inbox page: {inbox}" if inbox else "decide it on the inbox page"
    if config.slack_bot_token is None:
        return f"This server opens no forms in Slack (no SLACK_BOT_TOKEN); {elsewhere}."
    client = WebClient(token=config.slack_bot_token, base_url=str(config.slack_api_url), timeout=TIMEOUT_SECONDS)
    view = decision_form(kind, ticket_fields(ticket), response_url)
    try:
        await asyncio.to_thread(client.views_open, trigger_id=trigger_id, view=view)
        return None
    except SlackApiError as error:
        why = str(error.response.get("error", "refused"))
    except (SlackClientError, OSError) as error:
        why = type(error).__name__
    logger.warning("views.open for %s failed: %s", ticket.id, why)
    return f"The form could not be opened (Slack said: {why}); click again, or {elsewhere}."
