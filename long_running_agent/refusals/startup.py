"""What the start refuses: a database schema this version cannot use, a setting it cannot use."""

from __future__ import annotations

from ..names import EXPENSES
from . import Refusal


class SchemaError(Refusal):
    """The database's schema is not one this version can use or upgrade; the next step says what to run."""

    code = "schema_error"

    def __init__(self, current: str | None, head: str, message: str, *, next_step: str | None = None) -> None:
        self.current, self.head = current, head
        super().__init__(message, next_step=next_step)


class SchemaBehind(SchemaError):
    code = "schema_behind"
    next_step = f"Upgrade it with: {EXPENSES} migrate (or set AUTO_MIGRATE=true)."

    def __init__(self, current: str | None, head: str) -> None:
        super().__init__(current, head,
                         f"The database is at schema revision {current or 'none'}; this version needs {head}.")


class SchemaAhead(SchemaError):
    code = "schema_ahead"
    next_step = ("A newer version of the app has upgraded it: run that version, or restore a backup made before "
                 f"the upgrade ({EXPENSES} migrate never goes back).")

    def __init__(self, current: str, head: str) -> None:
        super().__init__(current, head, f"The database is at schema revision {current}, which this version does "
                                        f"not know; it needs {head}.")


class SchemaMismatch(SchemaError):
    code = "schema_mismatch"
    next_step = ("Restore a backup, or undo the partial change by hand (ledger/migrations/versions/ says what each "
                 f"revision adds), then run: {EXPENSES} migrate")

    def __init__(self, current: str | None, head: str, detail: str) -> None:
        if current == head:
            super().__init__(current, head, f"The database is at schema revision {head}, as this version needs, "
                                            f"but its tables do not match it ({detail}): they were changed by hand.",
                             next_step="Restore a backup, or put back what was removed (ledger/migrations/versions/ "
                                       "says what each revision makes).")
            return
        super().__init__(current, head, f"The database says schema revision {current}, but its tables do not match "
                                        f"it, so the upgrade to {head} stopped and changed nothing ({detail}).")


class SettingsError(Refusal, ValueError):
    """A setting in the environment has a value the app cannot use (settings.py names the variable)."""

    code = "invalid_setting"
    next_step = "Set it in .env or the environment (.env.example describes each setting), then start again."
