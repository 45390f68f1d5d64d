"""Another team's agent, on ADK too, that hands reimbursements to the expense agent over A2A.

It has no model of its own: its root agent is ADK's RemoteA2aAgent, so each message goes to the expense agent
(`make web`) as an A2A task, sent with this requester's client token. The expense agent knows the requester by that
token (its A2A_CLIENTS), never by anything in the message. Run with (from the project folder, `make web` running):
    EXPENSES_A2A_TOKEN=change-me-travel-bot .venv/bin/python examples/a2a_requester/main.py
    EXPENSES_A2A_TOKEN=change-me-travel-bot .venv/bin/adk run examples/a2a_requester
"""

from __future__ import annotations

import os

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from google.adk.agents.remote_a2a_agent import DEFAULT_TIMEOUT, RemoteA2aAgent

SERVER = os.getenv("EXPENSES_A2A_URL", "http://127.0.0.1:8000").rstrip("/")
AGENT_URL = f"{SERVER}/a2a/long_running_agent"  # where make web serves the expense agent to other agents
TOKEN = os.getenv("EXPENSES_A2A_TOKEN", "")  # this requester's token, from the server's A2A_CLIENTS


def with_token(timeout: httpx.Timeout) -> httpx.AsyncClient:
    """An HTTP client that sends this requester's client token with every request (the card's bearer scheme)."""
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=timeout)


root_agent = RemoteA2aAgent(
    name="expenses",
    description="The company's expense agent: reimburses an expense, once approvers agree when it is large.",
    agent_card=f"{AGENT_URL}{AGENT_CARD_WELL_KNOWN_PATH}",
    # A turn of the expense agent is one model turn or a few: ADK's own default timeout covers it.
    a2a_client_factory=ClientFactory(ClientConfig(httpx_client=with_token(httpx.Timeout(DEFAULT_TIMEOUT)))),
)
