"""Interactive Slack approvals: a click in Slack, verified, decided through the same ledger call as the API.

    actions.py    POST /slack/actions: Slack's signature checked, a replay refused, the
                  click or the form taken, the decision and the delivery in the background
    forms.py      Reject and Approve less: a modal opened with views.open (SLACK_BOT_TOKEN)

Needs slack_sdk (`pip install 'long-running-agent[slack]'`); the server imports
this package only when SLACK_SIGNING_SECRET is set. The messages themselves are
slack_messages.py's; they go out through the outbox (notifications.py).
Setting it up: docs/slack.md.
"""
