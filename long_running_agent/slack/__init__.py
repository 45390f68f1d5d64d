"""Interactive Slack approvals: messages with Approve, Reject and Approve less, and POST /slack/actions.

actions.py and forms.py need slack_sdk (`.venv/bin/pip install -e '.[slack]'`), imported only when
SLACK_SIGNING_SECRET is set. Setting it up, and what each click does: docs/slack.md.
"""
