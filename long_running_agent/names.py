"""The names every layer shares: the app, the agent, its tools, and the words for each state.

A leaf that imports nothing from the package, so any layer can name a tool or a status without importing
the layer that defines it (pyproject.toml's [tool.importlinter] checks the layers).
"""

from __future__ import annotations

from enum import StrEnum

# ADK names an app after its folder; `adk run` files sessions under it.
APP_NAME = "long_running_agent"
AGENT_NAME = "expense_agent"

# How every hint and page words a command: run from the project folder with the virtualenv
# `make demo` creates, which works whether or not that virtualenv was activated.
PYTHON = ".venv/bin/python"
MAIN_PY = f"{PYTHON} main.py"
# The approver CLI, a console script of this project (pyproject.toml's [project.scripts]).
EXPENSES = ".venv/bin/expenses"

# The tools, by the names ADK declares them to the model (their function names in tools.py).
APPROVAL_TOOL = "ask_for_approval"
REIMBURSE_TOOL = "reimburse"
WITHDRAW_TOOL = "withdraw_request"


class TicketStatus(StrEnum):
    """A ticket moves from PENDING to one of the others, once, and nowhere else."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    WITHDRAWN = "withdrawn"


DECIDED = (TicketStatus.APPROVED, TicketStatus.REJECTED, TicketStatus.EXPIRED, TicketStatus.WITHDRAWN)


class PayoutStatus(StrEnum):
    """What `reimburse` answers: paid now, paid by an earlier run of the same call, or sent to an approver."""

    PAID = "paid"
    ALREADY_PAID = "already_paid"
    NEEDS_APPROVAL = "needs_approval"


# What any tool answers when it refuses: {"status": "error", "error": "what happened; what to do"}.
ERROR = "error"


class Outcome(StrEnum):
    """What became of one attempt to deliver a decision to its conversation (delivery/courier.py)."""

    DELIVERED = "delivered"
    ALREADY_DELIVERED = "already_delivered"
    STILL_PENDING = "still_pending"
    UNREACHABLE = "unreachable"
    CONVERSATION_MISSING = "conversation_missing"
    BUSY = "busy"
    FAILED = "failed"
    SETTLED = "settled"
    # The first of two approvals: nothing to deliver yet; the conversation is told of the progress.
    WAITING = "waiting_for_second_approval"


# Where a ticket's conversation is kept (its `session_store`): "app", the app's own database, or another store's kind
# and address (delivery/conversations.py).
APP_STORE = "app"


def store_in_words(locator: str) -> str:
    """A ticket's session store, in words for people."""
    kind, _, where = locator.partition(":")
    return {
        APP_STORE: "the app's database",
        "sqlite": f"ADK's session file {where}",
        "database": f"the session database {where}",
        "memory": f"the memory of process {where.split(':')[1] if ':' in where else where} "
                  "(a session service with memory://)",
    }.get(kind, f"a session store this app cannot open ({where})")
