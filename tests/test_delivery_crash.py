"""A process killed in the middle of a delivery: the truth is told, and the next try delivers at once.

The delivering process holds the conversation's lock while the agent runs.
After `kill -9` its lock names a process that no longer exists, so an
immediate `python main.py deliver` takes over instead of answering "already
delivered" (nothing was) or waiting out the lease.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from support.conversation import pending_request
from support.desks import TestDesk
from support.processes import ROOT, run

from long_running_agent.ledger import Conversation

pytestmark = pytest.mark.subprocess

# A delivery whose model never answers: the process sits inside the run, holding the lock.
STALLED_DELIVERY = textwrap.dedent("""
    import asyncio, sys
    from google.adk.models import BaseLlm
    from long_running_agent.agent import build_app
    from long_running_agent.delivery.courier import Courier
    from long_running_agent.desk import Desk
    from long_running_agent.settings import load_settings

    class Stalled(BaseLlm):
        model: str = "stalled"
        async def generate_content_async(self, llm_request, stream=False):
            print("model called", flush=True)
            await asyncio.sleep(3600)
            yield  # never reached

    desk = Desk(load_settings(), app=build_app)
    asyncio.run(Courier(desk).deliver(sys.argv[1], actor="doomed", app=build_app(desk, model=Stalled())))
""")


async def lock_state(desk: TestDesk, url: str, conversation: Conversation):
    try:
        return await desk.ledger_at(url).locks.state(conversation)
    finally:
        await desk.close()


def test_resume_right_after_a_killed_delivery_delivers_once(desk, db_url, tmp_path):
    async def prepare():
        chat, _call, ticket_id = await pending_request(desk, db_url)
        await desk.ledger.tickets.decide(ticket_id, approver="bob", approve=True)
        await desk.close()
        return Conversation("long_running_agent", "alice", chat.session_id), ticket_id

    conversation, ticket_id = asyncio.run(prepare())
    script = tmp_path / "stalled.py"
    script.write_text(STALLED_DELIVERY)
    doomed = subprocess.Popen([sys.executable, str(script), ticket_id], cwd=ROOT,
                              env=os.environ | {"EXPENSES_DATABASE_URL": db_url},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Read up to the model's call: google-adk before 2.13 prints a warning about an experimental feature first.
    printed = []
    for line in doomed.stdout:
        printed.append(line)
        if line.strip() == "model called":
            break
    assert printed and printed[-1].strip() == "model called", f"the delivery never reached the model: {printed}"
    assert asyncio.run(lock_state(desk, db_url, conversation)) is not None

    doomed.send_signal(signal.SIGKILL)
    doomed.wait()
    started = time.monotonic()
    resumed = run("deliver", ticket_id, url=db_url)

    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert "already" not in resumed.stdout  # nothing had reached the conversation
    assert "was paid" in resumed.stdout
    # Waiting out the dead holder's 15 s lease would take longer than that alone; a busy machine's
    # slow Python start does not.
    assert time.monotonic() - started < 15
    ledger_view = run("show", ticket_id, url=db_url).stdout
    assert ledger_view.count(" paid ") == 1 and ledger_view.count(" delivered ") == 1, ledger_view
