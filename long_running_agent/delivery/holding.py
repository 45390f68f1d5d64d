"""A conversation already held for a delivery run, and the app whose guard runs inside that hold.

A delivery run must not take the lock its courier holds, so it runs in a copy of the app whose guard is handed
the hold in its constructor (`holding_app`), never through a global.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from google.adk.agents.invocation_context import InvocationContext
from google.adk.apps import App
from google.adk.plugins.base_plugin import BasePlugin

from ..ledger import Conversation, Ticket
from ..ledger.storage.locks import HeldLock


@dataclass(frozen=True)
class Holding:
    """A conversation already held for a delivery run, which takes no lock of its own.

    `lock`: the courier's, if it holds it; its release records the run's deliveries. `tickets`: the open ones read
    under the hold, by call id; `unpaid`: those decided in the transaction that took it.
    """

    conversation: Conversation
    lock: HeldLock | None = None
    tickets: Mapping[str, Ticket] = field(default_factory=dict)
    unpaid: frozenset[str] = frozenset()


@runtime_checkable
class HoldsConversations(Protocol):
    """A plugin that runs inside a hold when told to: the approval guard (`ApprovalGuard.holding_for`)."""

    def holding_for(self, holding: Holding) -> BasePlugin: ...


def holding_app(app: App, holding: Holding) -> App:
    """`app` with its approval guard running inside `holding`."""
    plugins = [plugin.holding_for(holding) if isinstance(plugin, HoldsConversations) else plugin
               for plugin in app.plugins]
    return App(name=app.name, root_agent=app.root_agent, plugins=plugins)


def running_app(context: InvocationContext) -> App:
    """The app this run is: the same agent, model and plugins, to deliver with from inside it."""
    return App(name=context.session.app_name, root_agent=context.agent,
               plugins=list(context.plugin_manager.plugins))
