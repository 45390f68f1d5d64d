"""ADK's /dev routes on `make web`: behind an identity header nobody reaches another user's conversation
through them, and no request writes into the package folder.

ADK's traces, eval sets and event graphs take a session id (or an event id)
and no user; its builder, tests and eval sets write files into the package.
The gate closes every /dev route but the few that hold nobody's data or are
held to the caller's own user id (docs/deployment.md lists them).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.routing import APIRoute
from support.http import assert_error, run_body, user_text
from support.servers import APP, in_process

from long_running_agent.web import create_server
from long_running_agent.web.gate import Gate

PACKAGE = Path(__file__).resolve().parent.parent / "long_running_agent"
HEADER = "X-Forwarded-User"
SECRET = "Reimburse $40 for the taxi to the oncologist"
# The /dev routes that stay open behind the header, and why: no user's data, or the caller's own.
OPEN_WITH_IDENTITY = {
    "/dev/apps/{app_name}/graph",
    "/dev/apps/{app_name}/build_graph",
    "/dev/apps/{app_name}/build_graph_image",
    "/dev/apps/{app_name}/users/{user_id}/sessions/{session_id}/events/{event_id}/graph",
}


def as_user(name: str) -> dict[str, str]:
    return {HEADER: name}


def package_files() -> set[str]:
    return {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*") if "__pycache__" not in p.parts}


@pytest.fixture
def package_unchanged():
    """Fails the test if any request wrote into the package folder (and removes what it wrote)."""
    before = package_files()
    yield
    written = package_files() - before
    for name in sorted(written, reverse=True):
        path = PACKAGE / name
        path.rmdir() if path.is_dir() else path.unlink()
    assert not written, f"requests wrote into the package folder: {sorted(written)}"


async def alices_conversation(client) -> tuple[str, str]:
    """alice's session with one exchange; returns (session id, the id of her message's event)."""
    made = await client.post(f"/apps/{APP}/users/alice/sessions", json={}, headers=as_user("alice"))
    assert made.status_code == 200, made.text
    session_id = made.json()["id"]
    ran = await client.post("/run", json=run_body("alice", session_id, user_text(SECRET)), headers=as_user("alice"))
    assert ran.status_code == 200, ran.text
    shown = await client.get(f"/apps/{APP}/users/alice/sessions/{session_id}", headers=as_user("alice"))
    [event_id] = [e["id"] for e in shown.json()["events"] if e["author"] == "user"]
    return session_id, event_id


async def test_behind_a_proxy_no_dev_route_shows_mallory_alices_conversation(desk, configure, package_unchanged):
    configure(trusted_user_header=HEADER)
    async with in_process(desk) as client:
        session_id, event_id = await alices_conversation(client)
        mallory = as_user("mallory")
        attempts = [
            client.post(f"/dev/apps/{APP}/eval-sets", json={"evalSet": {"eval_set_id": "stolen", "eval_cases": []}},
                        headers=mallory),
            client.post(f"/dev/apps/{APP}/eval_sets/stolen", headers=mallory),
            client.post(f"/dev/apps/{APP}/eval_sets/stolen/add_session",
                        json={"evalId": "alice", "sessionId": session_id, "userId": "alice"}, headers=mallory),
            client.get(f"/dev/apps/{APP}/eval_sets/stolen/evals/alice", headers=mallory),
            client.get(f"/dev/apps/{APP}/debug/trace/session/{session_id}", headers=mallory),
            client.get(f"/dev/apps/{APP}/debug/trace/{event_id}", headers=mallory),
        ]
        for attempt in attempts:
            answer = await attempt
            assert_error(answer, 404, "not_served")
            assert "oncologist" not in answer.text
        graph = f"/dev/apps/{APP}/users/alice/sessions/{session_id}/events/{event_id}/graph"
        assert_error(await client.get(graph, headers=mallory), 403, "identity_mismatch")
        # alice's own event graph is hers to see.
        assert (await client.get(graph, headers=as_user("alice"))).status_code == 200


async def test_behind_a_proxy_only_the_listed_dev_routes_are_served(configure):
    desk = configure(trusted_user_header=HEADER)
    dev_routes = [(route.path, method) for route in create_server(desk).routes
                  if isinstance(route, APIRoute) and route.path.startswith("/dev/") for method in route.methods]
    assert len(dev_routes) > 30  # ADK 2.13 has 39:'s builder, debug, eval, graph, test and deploy routes
    async with in_process(desk) as client:
        for path, method in dev_routes:
            url = re.sub(r"\{app_name\}", APP, path)
            url = re.sub(r"\{user_id\}", "alice", url)
            url = re.sub(r"\{[a-z_]+(?::path)?\}", "x", url)
            answer = await client.request(method, url, headers=as_user("alice"))
            if path in OPEN_WITH_IDENTITY and method == "GET":
                assert answer.status_code == 200, (method, path, answer.text)
            else:
                assert_error(answer, 404, "not_served")
        assert_error(await client.post("/config/telemetry", json={"telemetry": True},
                                       headers=as_user("alice") | {"x-adk-telemetry-request": "true"}),
                     404, "not_served")


async def test_every_other_route_with_a_user_id_is_held_to_the_callers_own(configure):
    desk = configure(trusted_user_header=HEADER)
    user_routes = [(route.path, method) for route in create_server(desk).routes
                   if isinstance(route, APIRoute) and "{user_id}" in route.path and not route.path.startswith("/dev/")
                   for method in route.methods]
    assert len(user_routes) >= 14  # sessions, artifacts, memory
    async with in_process(desk) as client:
        for path, method in user_routes:
            url = re.sub(r"\{app_name\}", APP, path)
            url = re.sub(r"\{user_id\}", "alice", url)
            url = re.sub(r"\{[a-z_]+(?::path)?\}", "x", url)
            assert_error(await client.request(method, url, headers=as_user("mallory")), 403, "identity_mismatch")
        for body_route in ("/run", "/run_sse", "/agent-identity/finalize"):
            body = {"userId": "alice", "sessionId": "x", "connectorName": "x", "userIdValidationState": "x",
                    "consentNonce": "x"}
            answer = await client.post(body_route, json=body, headers=as_user("mallory"))
            assert_error(answer, 403, "identity_mismatch")


async def test_run_live_is_held_to_the_callers_own_user_id(configure):
    desk = configure(trusted_user_header=HEADER)
    reached: list[str] = []

    async def adk(scope, receive, send) -> None:
        reached.append(scope["query_string"].decode())

    gate = Gate(adk, settings=desk.settings, apps=[APP])
    for query, headers, served in [
        (b"app_name=long_running_agent&user_id=alice&session_id=s", [(b"x-forwarded-user", b"alice")], True),
        (b"app_name=long_running_agent&user_id=alice&session_id=s", [(b"x-forwarded-user", b"mallory")], False),
        (b"app_name=long_running_agent&user_id=alice&session_id=s", [], False),
        (b"app_name=long_running_agent&user_id=alice&session_id=s",
         [(b"x-forwarded-user", b"alice"), (b"x-forwarded-user", b"mallory")], False),
    ]:
        sent: list[dict] = []

        async def send(message, sent=sent) -> None:
            sent.append(message)

        reached.clear()
        scope = {"type": "websocket", "path": "/run_live", "query_string": query, "headers": headers}
        await gate(scope, None, send)
        assert bool(reached) is served, (query, headers)
        assert sent == ([] if served else [{"type": "websocket.close", "code": 1008}])


async def test_two_identity_headers_are_refused(desk, configure):
    configure(trusted_user_header=HEADER)
    async with in_process(desk) as client:
        both = [(HEADER, "alice"), (HEADER, "mallory")]
        made = await client.post(f"/apps/{APP}/users/alice/sessions", json={}, headers=both)
        assert_error(made, 400, "duplicate_identity")
        ran = await client.post("/run", json=run_body("mallory", "s", user_text(SECRET)), headers=both)
        assert_error(ran, 400, "duplicate_identity")
        # One header, once: served.
        made = await client.post(f"/apps/{APP}/users/alice/sessions", json={}, headers=as_user("alice"))
        assert made.status_code == 200, made.text


async def test_no_request_writes_into_the_package_folder(desk, package_unchanged):
    # No identity header: the loopback development set-up, where the dev UI is served.
    async with in_process(desk) as client:
        writes = [
            client.post(f"/dev/apps/{APP}/eval-sets", json={"evalSet": {"eval_set_id": "mine", "eval_cases": []}}),
            client.post(f"/dev/apps/{APP}/eval_sets/mine"),
            client.post(f"/dev/apps/{APP}/builder/save", files={"files": ("root_agent.yaml", b"name: x\n")}),
            client.get(f"/dev/apps/{APP}/builder", params={"tmp": "true"}),
            client.put(f"/dev/apps/{APP}/tests/mine", json={"session_data": {"events": []}}),
            client.post(f"/dev/apps/{APP}/tests/rebuild"),
        ]
        for write in writes:
            assert_error(await write, 404, "not_served")
        # Reading is still served there.
        assert (await client.get(f"/dev/apps/{APP}/eval_sets")).status_code == 200
