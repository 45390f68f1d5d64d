"""Interactive Slack approvals: every part of them, in one package.

    messages.py   what approvers see: each event's text, Block Kit messages and buttons, the forms
    replies.py    a clicked message's update (the ticket as it stands), drawn when it is sent
    actions.py    POST /slack/actions: Slack's signature checked, a replay refused, the click or the
                  form taken; the decision and the delivery in the background
    forms.py      Reject and Approve less: a modal opened with views.open (SLACK_BOT_TOKEN)
    interactivity.py  the route itself (Slack's Interactivity Request URL), served by `make web` with Slack on

The webhook sender (notifications.py) sends what messages.py and replies.py draw; actions.py and forms.py
need slack_sdk (`.venv/bin/pip install -e '.[slack]'`), imported only when SLACK_SIGNING_SECRET is set.
Setting it up: docs/slack.md.
"""
