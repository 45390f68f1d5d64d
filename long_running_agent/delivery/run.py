"""One run of the agent as the approval guard sees it: the per-run object the tools reach through their context.

The guard keeps an `ApprovalRun` in the invocation's `custom_metadata`, which ADK keeps in memory for the run and
never stores; the tools and callbacks reach it, and the desk, through the context ADK hands them: no global.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from google.adk.agents.invocation_context import InvocationContext

from ..adk_compat import run_metadata
from ..ledger import Conversation, Ledger, Ticket, ToolCall
from ..ledger.storage.locks import HeldLock
from ..settings import Settings
from .conversations import locate
from .courier import Courier
from .holding import Holding

if TYPE_CHECKING:
    from ..desk import Desk

# Where a run keeps its ApprovalRun in ADK's per-invocation metadata.
RUN_KEY = "approval_run"


@dataclass
class ApprovalRun:
    """What one run of the agent needs: the desk, its conversation, and what the guard read and decided."""

    desk: Desk
    conversation: Conversation
    invocation_id: str
    # The conversation's lock, when this run took it; or the hold it runs inside.
    lock: HeldLock | None = None
    held: Holding | None = None
    # The conversation's open tickets, read under the lock, by call id.
    known: Mapping[str, Ticket] = field(default_factory=dict)
    # The tickets whose decisions this run delivers.
    delivering: list[str] = field(default_factory=list)
    # Tickets known to have no payout without asking the ledger: decided in the transaction that
    # took this run's conversation and not paid by this run since (nothing else can pay them meanwhile).
    unpaid: set[str] = field(default_factory=set)
    # What the agent says instead of running (a refusal, or the news of a ticket).
    note: str | None = None

    @property
    def courier(self) -> Courier:
        return Courier(self.desk)

    @property
    def settings(self) -> Settings:
        return self.desk.settings

    @property
    def ledger(self) -> Ledger:
        return self.desk.ledger

    async def tool_call(self, context: Any, *, call_id: str | None) -> ToolCall:
        """The call `call_id` that `context` (a ToolContext) runs: where its conversation is kept, and the decisions
        this run delivers."""
        session = context.session
        store = await locate(context.get_invocation_context().session_service, app_name=session.app_name,
                             app_database_url=self.settings.database_url)
        delivered = tuple(t for t in self.known.values() if t.id in self.delivering)
        return ToolCall(self.conversation, call_id=call_id or "", message_id=context.invocation_id,
                        session_store=store, resumed_by=delivered)


def found_run(context: Any) -> ApprovalRun | None:
    """The run of `context` (an InvocationContext, a tool's or a callback's), if the guard started one."""
    metadata = run_metadata(context) if isinstance(context, InvocationContext) else context.custom_metadata
    run = metadata.get(RUN_KEY)
    return run if isinstance(run, ApprovalRun) else None


def delivers_nothing(context: Any) -> bool:
    """Whether the run of `context` delivers no decision: only such a run may end well when its model fails."""
    run = found_run(context)
    return run is None or not run.delivering


def approval_run(context: Any) -> ApprovalRun:
    """The run `context` belongs to; a RuntimeError in an app without the approval guard."""
    run = found_run(context)
    if run is None:
        raise RuntimeError("This agent runs only with its approval guard, which hands the tools the desk: "
                           "run the app agent.py's build_app(desk) builds, not the bare agent.")
    return run


def start_run(context: InvocationContext, run: ApprovalRun) -> ApprovalRun:
    run_metadata(context)[RUN_KEY] = run
    return run


def finish_run(context: InvocationContext) -> ApprovalRun | None:
    """The run of an invocation, taken out of it as the run ends: its end is handled once."""
    run = run_metadata(context).pop(RUN_KEY, None)
    return run if isinstance(run, ApprovalRun) else None
