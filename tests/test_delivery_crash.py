"""A process killed in the middle of a delivery: the truth is told, and the next try delivers at once.

The delivering process holds the conversation's lock while the agent runs.
After `kill -9` its lock names a process that no longer exists, so an
immediate `python main.py resume` takes over instead of answering "already
delivered" (nothing was) or waiting out the lease.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
import time

from support.conversation import pending_request
from support.processes import ROOT, run

from long_running_agent.ledger import get_ledger
from long_running_agent.locks import Conversation
from long_running_agent.runtime import close_runtime

# A delivery whose model never answers: the process sits inside the run, holding the lock.
STALLED_DELIVERY = textwrap.dedent("""
    import asyncio, sys
    from google.adk.models import BaseLlm
    from long_running_agent.agent import build_app
    from long_running_agent.approvals import deliver
    from long_running_agent.ledger import get_ledger

    class Stalled(BaseLlm):
        model: str = "stalled"
        async def generate_content_async(self, llm_request, stream=False):
            print("model called", flush=True)
            await asyncio.sleep(3600)
            yield  # never reached

    async def main(url, ticket_id):
        await deliver(get_ledger(url), ticket_id, app_database_url=url, actor="doomed",
                      app=build_app(model=Stalled()))

    asyncio.run(main(sys.argv[1], sys.argv[2]))
""")


async def lock_state(url: str, conversation: Conversation):
    try:
        return await get_ledger(url).locks.state(conversation)
    finally:
        await close_runtime()


def test_resume_right_after_a_killed_delivery_delivers_once(db_url, tmp_path):
    async def prepare():
        chat, _call, ticket_id = await pending_request(db_url)
        await get_ledger(db_url).decide(ticket_id, approver="bob", approve=True)
        await close_runtime()
        return Conversation("long_running_agent", "alice", chat.session_id), ticket_id

    conversation, ticket_id = asyncio.run(prepare())
    script = tmp_path / "stalled.py"
    script.write_text(STALLED_DELIVERY)
    doomed = subprocess.Popen([sys.executable, str(script), db_url, ticket_id], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert doomed.stdout is not None
    assert doomed.stdout.readline().strip() == "model called", "the delivery never reached the model"
    assert asyncio.run(lock_state(db_url, conversation)) is not None

    doomed.send_signal(signal.SIGKILL)
    doomed.wait()
    started = time.monotonic()
    resumed = run("resume", ticket_id, url=db_url)

    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert "already" not in resumed.stdout  # nothing had reached the conversation
    assert "was paid" in resumed.stdout
    assert time.monotonic() - started < 12  # no waiting out the 15 s lease of the dead holder
    ledger_view = run("show", ticket_id, url=db_url).stdout
    assert ledger_view.count(" paid ") == 1 and ledger_view.count(" delivered ") == 1, ledger_view
