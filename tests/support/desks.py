"""A test's desk: made by the `desk` fixture for each test that takes it, changed by `configure` and `clock`.

A test that uses the app takes the `desk` fixture (or one that changes it:
`configure`, `clock`, `sqlite_url`, `db_url`) and gets a desk of its own: the
offline model, a SQLite file in its tmp_path (a copy of ledger_template.py's,
once opened), the real clock. `desk.configure(...)` changes a setting of that
desk and `clock` its clock; it then builds its ledger and app again from them.
Helpers take the desk they work on as an argument; a test that takes none
builds none.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
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

    def __init__(self, settings: Settings, *, template: Path | None = None) -> None:
        super().__init__(settings, app=self._build_app)
        self.app_override: App | None = None
        self.template = template  # the SQLite file its own database starts as (ledger_template.py)
        # Engines the test opened beside the desk's (a runner "in another process"): disposed when the test ends.
        self.opened: list[AsyncEngine] = []

    def _build_app(self, desk: Desk, *, model: str | BaseLlm | None = None) -> App:
        return self.app_override or build_app(desk, model=model)

    def engine_at(self, database_url: str) -> AsyncEngine:
        self.start_from_template(database_url)  # before anything opens the test's own file
        return super().engine_at(database_url)

    def start_from_template(self, database_url: str) -> None:
        """Start the desk's own SQLite file as a copy of the template, if it is `database_url` and still to be made."""
        if self.template is not None:
            ledger_template.copy_to(self.template, database_url, self.settings)

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

    def configure(self, **fields: Any) -> TestDesk:
        """Change settings of this desk: configure(approval_threshold=Decimal("200"))."""
        unknown = set(fields) - set(Settings.model_fields)
        assert not unknown, f"no such setting: {unknown}"  # model_copy would add them silently
        if "approvers" in fields:  # {token: name}, as APPROVERS's parser gives them (each in the group everyone is in)
            fields["approvers"] = parse_approvers(fields["approvers"])
        return self.change(settings=self.settings.model_copy(update=fields))
