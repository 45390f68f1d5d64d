"""The other side of A2A, for tests against a real `make web`: another agent's a2a-sdk client, and the example.

`sdk_client` is a2a-sdk's own client (`create_client`, from the agent card) holding a client token, as a requester's
agent built on a2a-sdk would be; tasks come back as the JSON its wire carries (camelCase), so support/a2a_calls.py's
readers (`state`, `ticket_of`, `payouts_of`) read them. `example` runs examples/a2a_requester/main.py as a process,
its output (stderr too, for a failure's message) read line by line as it comes, so that a test can act on what it
printed while it waits.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
from a2a.client import Client, ClientConfig, create_client
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskPushNotificationConfig
from google.protobuf.json_format import MessageToDict

from .a2a_calls import PATH
from .processes import ROOT
from .servers import LUNCH

EXAMPLE = "examples/a2a_requester/main.py"


@asynccontextmanager
async def sdk_client(base_url: str, token: str) -> AsyncIterator[Client]:
    """a2a-sdk's client of the expense agent `make web` serves at `base_url`, sending `token` as its bearer."""
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        yield await create_client(f"{base_url}{PATH}", ClientConfig(httpx_client=http))


async def ask(client: Client, words: str = LUNCH, push: TaskPushNotificationConfig | None = None) -> dict[str, Any]:
    """A new message of `words` (with a push configuration, if given): the task it answers with, as JSON."""
    request = SendMessageRequest(message=Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER,
                                                 parts=[Part(text=words)]))
    if push is not None:
        request.configuration.task_push_notification_config.CopyFrom(push)
    [answer] = [streamed async for streamed in client.send_message(request)]
    task: dict[str, Any] = MessageToDict(answer.task)
    return task


async def get(client: Client, task_id: str) -> dict[str, Any]:
    task: dict[str, Any] = MessageToDict(await client.get_task(GetTaskRequest(id=task_id)))
    return task


class Printed:
    """A process's stdout, line by line as it comes (a thread reads it), so a test can wait for one line."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process, self.lines = process, list[str]()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern: str, timeout: float = 90) -> re.Match[str]:
        """The first line matching `pattern`, once printed; a failed test if the process ends or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if found := next((m for line in list(self.lines) if (m := re.search(pattern, line))), None):
                return found
            if self.process.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"{EXAMPLE} printed no line matching {pattern!r}:\n" + "\n".join(self.lines))

    def ended(self, timeout: float = 60) -> int:
        """The exit status, once the process ends and all it printed is read."""
        status = self.process.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return status


@contextmanager
def example(base_url: str, token: str, *args: str) -> Iterator[Printed]:
    """`.venv/bin/python examples/a2a_requester/main.py *args` against `make web` at `base_url`, as client `token`."""
    env = os.environ | {"EXPENSES_A2A_URL": base_url, "EXPENSES_A2A_TOKEN": token, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([sys.executable, EXAMPLE, *args], cwd=ROOT, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        yield Printed(process)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
