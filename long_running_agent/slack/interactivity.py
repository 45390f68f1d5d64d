"""POST /slack/actions: Slack's Interactivity Request URL, served when SLACK_SIGNING_SECRET is set (docs/slack.md)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from .actions import SLACK, SlackRefused

slack_routes = APIRouter(include_in_schema=False)


@slack_routes.post("/slack/actions")
async def slack_actions(request: Request) -> Response:
    try:
        # The raw body: Slack signs the bytes, not the form. SlackActions is in the app's state (web/server.py).
        answer = await request.app.state.slack.take(await request.body(), dict(request.headers))
    except SlackRefused as refused:
        return JSONResponse({"error": refused.code, "message": refused.message, "fix": refused.next_for(SLACK)},
                            status_code=refused.status)
    # Slack wants a 200 within three seconds; an empty one closes a form, `response_action` keeps it open.
    return JSONResponse(answer) if answer else Response(status_code=200)
