"""The agent card other agents read at /a2a/long_running_agent/.well-known/agent-card.json: the skill, where to send
JSON-RPC, the bearer scheme, streaming and push notifications."""

from __future__ import annotations

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)

from ..desk import Desk

BEARER = "bearer"


def agent_card(desk: Desk, url: str) -> AgentCard:
    """The card of the agent served at `url`, with the desk's policy in its skill."""
    threshold = desk.policy.rules.threshold
    return AgentCard(
        name=desk.app.name,
        description="Reimburses employees' expenses in US dollars; above a limit, only after people approve.",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        security_schemes={BEARER: SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(
            scheme="bearer", description="A client token from A2A_CLIENTS: it names the requester."))},
        security_requirements=[SecurityRequirement(schemes={BEARER: StringList()})],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(
            id="reimburse", name="Reimburse an expense", tags=["expenses", "approval"],
            description=(f"Pays an expense of up to ${threshold:,} at once. Above that it opens a ticket that "
                         "approvers decide on their own channels; the task stays working until they do, then "
                         "ends completed (with the payout), rejected or canceled."),
            examples=["Please reimburse $45 for a taxi", "Please reimburse $250 for the team lunch"])],
    )
