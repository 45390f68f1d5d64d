"""A test's desk: one per test, made by the fixtures, changed by `configure` and `clock`.

Each test gets a desk of its own (fixtures.py's `desk`): the offline model, a
SQLite file in its tmp_path (a copy of ledger_template.py's, once opened), the real clock. `configure(...)` changes a
setting of that same desk and `clock` its clock; it then builds its ledger
and app again from them. Helpers with no fixture at hand (`ledger_at`,
`make_runner`) take the test's desk from `current()`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from google.adk.apps import App
from google.adk.models import BaseLlm
from sqlalchemy.ext.asyncio import AsyncEngine

from long_running_agent.agent import build_app
from long_running_agent.desk import Desk, policy_of
from long_running_agent.settings import Settings, parse_approvers

from . import ledger_template


class TestDesk(Desk):
    """The desk of one test: its settings and clock change when the test says so."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, app=self._build_app)
        self.app_override: App | None = None

    def _build_app(self, desk: Desk, *, model: str | BaseLlm | None = None) -> App:
        return self.app_override or build_app(desk, model=model)

    def engine_at(self, database_url: str) -> AsyncEngine:
        ledger_template.copy_to(database_url, self.settings)  # before anything opens the test's own file
        return super().engine_at(database_url)

    def change(self, *, settings: Settings | None = None, clock: Callable[[], datetime] | None = None,
               app: App | None = None) -> TestDesk:
        """Run on these settings, clock or app from now on; what was built from the old ones is built again."""
        self.settings = settings or self.settings
        self.policy = policy_of(self.settings)  # APPROVERS and the policy file read again, as at a restart
        self.clock = clock or self.clock
        self.app_override = app or self.app_override
        self._ledgers.clear()
        self._app = None
        return self


_current: list[TestDesk] = []


def current() -> TestDesk:
    """The desk of the test that runs now."""
    assert _current, "no desk yet: the tests' fixtures make one for each test (support/fixtures.py)"
    return _current[-1]


def start(settings: Settings) -> TestDesk:
    _current[:] = [TestDesk(settings)]
    return _current[0]


def configure(**fields: Any) -> TestDesk:
    """Change settings of the test's desk: configure(approval_threshold=Decimal("200"))."""
    unknown = set(fields) - set(Settings.model_fields)
    assert not unknown, f"no such setting: {unknown}"  # model_copy would add them silently
    desk = current()
    if "approvers" in fields:  # {token: name}, as APPROVERS's parser gives them (each in the group everyone is in)
        fields["approvers"] = parse_approvers(fields["approvers"])
    return desk.change(settings=desk.settings.model_copy(update=fields))


async def finish() -> None:
    while _current:
        await _current.pop().close()
