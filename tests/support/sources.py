"""Modules of the project loaded from their file, where no import path reaches them: main.py, a migration."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from long_running_agent.ledger.storage import migrate


def from_file(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def migration(revision: str) -> ModuleType:
    """The migration whose file starts with `revision` ("0010")."""
    [path] = (migrate.MIGRATIONS / "versions").glob(f"{revision}_*.py")
    return from_file(f"migration_{revision}", path)
