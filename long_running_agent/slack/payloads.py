"""What POST /slack/actions reads of a signed request, checked in one place: the payload's shape and its response_url.

A signature proves the request came through Slack's app, not that its JSON has the shape Slack documents, nor that
its response_url is Slack's: each is checked before anything is decided or sent (docs/slack.md, "What each click
does"). The outbox checks a response_url again before it POSTs there.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from .messages import AMOUNT, REASON


class _Id(BaseModel):
    id: str


class Action(BaseModel):
    action_id: str
    value: str = ""


class _Input(BaseModel):
    value: str | None = None


class _State(BaseModel):
    values: dict[str, dict[str, _Input]]


class View(BaseModel):
    callback_id: str
    private_metadata: str = ""
    state: _State

    def written(self) -> dict[str, str | None]:
        """What was written in the form: {"reason": ..., "amount": ...} (None where not asked)."""
        return {name: (self.state.values.get(name, {}).get(name) or _Input()).value for name in (REASON, AMOUNT)}


class _Payload(BaseModel):
    user: _Id
    team: _Id | None = None  # who sent it: SLACK_TEAM_ID's workspace, when it is set


class Click(_Payload):
    type: Literal["block_actions"]
    actions: Annotated[list[Action], Field(min_length=1)]
    response_url: str | None = None  # none for a button outside a message
    trigger_id: str = ""


class Submission(_Payload):
    type: Literal["view_submission"]
    view: View


class _Kind(BaseModel):
    type: str


class FormTarget(BaseModel):
    """The `private_metadata` of this app's forms (messages.decision_form): the ticket, and where to answer."""

    ticket: str
    response_url: str


def parse(text: str) -> Click | Submission | None:
    """The click or form submission in `text` (JSON), None for another kind (a form closed, say); pydantic's
    ValidationError, naming the field, when it is not what Slack sends.

    pydantic parses the JSON itself: nesting beyond its limit is a ValidationError, where json.loads recurses.
    """
    kind = _Kind.model_validate_json(text).type
    if kind == "block_actions":
        return Click.model_validate_json(text)
    if kind == "view_submission":
        return Submission.model_validate_json(text)
    return None
