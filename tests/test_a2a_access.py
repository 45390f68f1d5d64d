"""Who reaches the A2A endpoint in PRODUCTION_MODE, what a body sent without a length gets, and what a withdrawal
over A2A counts (make web's server, in this process): the agent and its card are served behind the clients' own
tokens, the rest stays closed."""

from __future__ import annotations

import json

from support.scrape import scrape
from support.servers import TOKENS, in_process

from long_running_agent.ledger import TicketStatus

CLIENT_TOKEN = "travel-bot-token-for-tests"
A2A = "/a2a/long_running_agent"
HEADERS = {"Authorization": f"Bearer {CLIENT_TOKEN}", "A2A-Version": "1.0", "Content-Type": "application/json"}


def send(text: str, message_id: str = "m-1") -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}}}


async def test_production_serves_the_agent_and_its_card_behind_client_tokens(desk, configure):
    configure(production=True, trusted_user_header="X-Forwarded-User", a2a_clients={CLIENT_TOKEN: "travel-bot"},
              approvers={token: name for name, token in TOKENS.items()})
    async with in_process(desk) as client:
        card = await client.get(f"{A2A}/.well-known/agent-card.json")
        assert card.status_code == 200 and card.json()["capabilities"]["pushNotifications"] is True
        # The proxy's identity header does not stand in for a client token.
        refused = await client.post(A2A, json=send("Please reimburse $250 for the team lunch"),
                                    headers={"X-Forwarded-User": "travel-bot", "A2A-Version": "1.0"})
        assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"
        assert await desk.ledger.tickets.count(TicketStatus.PENDING) == 0
        answered = await client.post(A2A, json=send("Please reimburse $250 for the team lunch"), headers=HEADERS)
        task = answered.json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_WORKING", answered.text
        [ticket] = await desk.ledger.tickets.with_status(TicketStatus.PENDING)
        assert ticket.user_id == "travel-bot"
        # What production mode closes stays closed.
        assert (await client.get("/dev-ui/")).status_code == 404


async def test_a_body_without_a_length_is_cut_at_the_limit_with_a_json_rpc_error(desk, configure):
    configure(a2a_clients={CLIENT_TOKEN: "travel-bot"})
    big = json.dumps(send("x" * 300_000)).encode()

    async def chunks():  # no Content-Length: the body arrives chunked and is counted as it is read
        for start in range(0, len(big), 16_384):
            yield big[start:start + 16_384]

    async with in_process(desk) as client:
        answer = await client.post(A2A, content=chunks(), headers=HEADERS)
        assert answer.status_code == 413
        assert answer.json()["error"]["code"] == -32600 and "KiB" in answer.json()["error"]["message"]
        assert await desk.ledger.tickets.count(TicketStatus.PENDING) == 0


async def test_a_withdrawal_over_a2a_counts_as_a_decision_through_a2a(desk, configure):
    configure(a2a_clients={CLIENT_TOKEN: "travel-bot"})
    async with in_process(desk) as client:
        task = (await client.post(A2A, json=send("Please reimburse $250 for the team lunch"),
                                  headers=HEADERS)).json()["result"]["task"]
        before = await scrape(client)
        cancel = {"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": task["id"]}}
        canceled = (await client.post(A2A, json=cancel, headers=HEADERS)).json()["result"]
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        after = await scrape(client)
        assert after("expenses_decisions_total", outcome="withdrawn", channel="a2a") == 1
        assert after("expenses_pending_tickets") == before("expenses_pending_tickets") - 1
