"""What a test process keeps between tests (tests/support/heap.py): not the servers earlier tests built."""

from __future__ import annotations

import gc
import weakref

from support.desks import TestDesk
from support.heap import forget_endpoints
from support.servers import in_process


async def test_a_server_a_test_built_is_not_kept_alive_after_it(desk, tmp_path):
    first = TestDesk(desk.settings.model_copy(update={"database_url": f"sqlite+aiosqlite:///{tmp_path}/first.db"}),
                     template=desk.template)
    async with in_process(first) as client:
        assert (await client.get("/health")).status_code == 200
    gone = weakref.ref(first)
    del first, client
    async with in_process(desk) as client:  # the next server takes ADK's registry of session stores, as the next test's
        assert (await client.get("/health")).status_code == 200

    forget_endpoints()  # what support/heap.py does after each test
    gc.collect()
    assert gone() is None, "a server built by an earlier test is still alive: its desk, engine and sessions with it"
