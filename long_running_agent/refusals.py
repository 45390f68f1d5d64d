"""Every refusal a person can meet, defined once: a stable code, what happened, and what to do next.

Like an HTTP status registry. The ledger, the input rules, the approval guard,
the delivery of decisions, the schema check and the settings raise these; each
surface only renders them:

    the CLI    error: <message> <next step>           a command to run (cli.py)
    the API    {"error": <code>, "message", "fix"}    a route to call; the status code is the API's (web/errors.py)
    the inbox  the API's message and fix
    the chat   a tool's {"status": "error", "error": <message> <next step>}, or the guard's note (approval/notes.py)

A next step names the actions it needs - {inbox}, {show}, {deliver},
{decide}, {approve}, {settle}, {approve_less}, {restart} - and each surface
words them in its own terms (`Actions`): ".venv/bin/expenses deliver T-...", or
"POST /api/approvals/T-.../deliver". The code never changes for a refusal;
the wording may.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, fields
from datetime import date, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, ClassVar

from .names import EXPENSES, Outcome, TicketStatus

if TYPE_CHECKING:
    from .ledger.records import Payout, Ticket


@dataclass(frozen=True)
class Actions:
    """How one surface words each action a next step can name; `{ticket}` stands for the ticket's id."""

    inbox: str         # list the pending tickets
    show: str          # see one ticket's state and history
    deliver: str       # deliver a recorded decision to its conversation
    decide: str        # an approver approves or rejects it
    approve: str       # another approver approves it
    settle: str        # pay (or close) a decision whose conversation is gone
    approve_less: str  # approve less than was asked, with a reason
    restart: str       # start the process again on the database

    def words(self, ticket_id: str) -> dict[str, str]:
        return {f.name: getattr(self, f.name).replace("{ticket}", ticket_id) for f in fields(self)}


class Refusal(Exception):
    """Something refused: `code` for programs, the message (str) for people, and `next_step`: what to do.

    Each class sets its `code` and `next_step`; an instance sets its own where one
    class covers two cases (a ticket already decided, or withdrawn by its requester).
    """

    code: str = "refused"
    next_step: str = ""

    def __init__(self, message: str, *, ticket_id: str = "", next_step: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.ticket_id = ticket_id
        if next_step is not None:
            self.next_step = next_step
        if code is not None:
            self.code = code

    def next_for(self, actions: Actions) -> str:
        """The next step, in the words of the surface that `actions` describes."""
        return self.next_step.format_map(actions.words(self.ticket_id))

    def sentence(self, actions: Actions) -> str:
        """The message and the next step, in one line."""
        return f"{self.message} {self.next_for(actions)}".strip()


def dollars(cents: int) -> str:
    return f"${Decimal(cents) / 100:,.2f}"


# SQLAlchemy prefixes the driver's class and appends the statement, its
# parameters and a link to the driver's message.
_SQL_TAIL = re.compile(r"\s*(?:\[SQL: |\[parameters: |\(Background on this error at: ).*", re.DOTALL)
_DRIVER = re.compile(r"\((?:sqlalchemy|sqlite3|asyncpg|psycopg)[\w.]*\) ")


def causes(error: BaseException) -> Iterator[BaseException]:
    """`error` and what caused it, outermost first (ADK and google-genai wrap the errors they pass on)."""
    seen: list[BaseException] = []
    cause: BaseException | None = error
    while cause is not None and cause not in seen:
        seen.append(cause)
        yield cause
        cause = cause.__cause__ or cause.__context__


def without_sql(text: str | None) -> str | None:
    """`text` (an error recorded for people to read) without the SQL SQLAlchemy put in it."""
    return _DRIVER.sub("", _SQL_TAIL.sub("", text)) if text else text


# --- what the ledger refuses ------------------------------------------------------


class LedgerError(Refusal):
    """A ledger operation refused."""


class TicketNotFound(LedgerError):
    code = "ticket_not_found"
    next_step = "Check the id; {inbox} lists the pending tickets."

    def __init__(self, ticket_id: str) -> None:
        super().__init__(f"No ticket {ticket_id!r}.", ticket_id=ticket_id)


UNDELIVERED = ("The decision is recorded but has not reached the conversation yet; deliver it with {deliver}.")


class AlreadyDecided(LedgerError):
    """The ticket left pending before this decision; the first decision stands."""

    code = "already_decided"

    def __init__(self, ticket: Ticket) -> None:
        self.ticket = ticket
        if ticket.status is TicketStatus.WITHDRAWN:
            # Whether or not the withdrawal has reached the chat yet: the requester made it there.
            message = (f"Ticket {ticket.id} was withdrawn by its requester, {ticket.decided_by}; "
                       "there is nothing left to decide.")
            next_step = "Nothing to do: the requester withdrew it, and nothing will be paid for it."
        else:
            by = f" by {ticket.decided_by}" if ticket.decided_by else ""
            message = f"Ticket {ticket.id} is already {ticket.status}{by}."
            next_step = "Nothing to do: the first decision stands. {show} shows its history."
            if not (ticket.delivered_at or ticket.settled_at):
                next_step = UNDELIVERED
        withdrawn = ticket.status is TicketStatus.WITHDRAWN
        super().__init__(message, ticket_id=ticket.id, next_step=next_step, code="withdrawn" if withdrawn else None)


class AlreadyApprovedByYou(LedgerError):
    """Under the two-person rule, the approver already gave the first approval; someone else gives the second."""

    code = "already_approved_by_you"
    next_step = "The second approval: {approve}."

    def __init__(self, ticket: Ticket) -> None:
        self.ticket = ticket
        super().__init__(f"{ticket.first_approved_by} already gave the first of two approvals on ticket "
                         f"{ticket.id}; a second, different approver has to approve it.", ticket_id=ticket.id)


class TicketExpired(LedgerError):
    code = "ticket_expired"
    next_step = "Nothing to do: the requester was told it expired and has to ask again."

    def __init__(self, ticket: Ticket) -> None:
        self.ticket = ticket
        super().__init__(f"Ticket {ticket.id} expired at {ticket.expires_at:%Y-%m-%d %H:%M} UTC and can no "
                         "longer be decided; the requester has to ask again.", ticket_id=ticket.id)


class NotAllowed(LedgerError):
    """The approver is the requester: nobody decides their own expense."""

    code = "not_allowed"
    next_step = "Another approver has to decide it."

    def __init__(self, ticket_id: str, approver: str) -> None:
        self.approver = approver
        super().__init__(f"{approver} requested ticket {ticket_id} and cannot approve or reject it.",
                         ticket_id=ticket_id)


class NotAnApprover(LedgerError):
    """APPROVERS names who may decide, and this name is not among them."""

    code = "not_an_approver"
    next_step = "Decide as one of them, or ask one of them to decide it."

    def __init__(self, name: str, approvers: list[str]) -> None:
        self.name, self.approvers = name, approvers
        super().__init__(f"{name} is not an approver: APPROVERS names {', '.join(approvers)}.")


class NotRequester(LedgerError):
    """Only the person who asked may withdraw a request."""

    code = "not_requester"
    next_step = "An approver can reject it instead."

    def __init__(self, ticket_id: str, who: str) -> None:
        self.who = who
        super().__init__(f"{who} did not request ticket {ticket_id}; only its requester can withdraw it.",
                         ticket_id=ticket_id)


class NotApproved(LedgerError):
    """No approved ticket of the conversation matches a payout above the threshold."""

    code = "not_approved"
    next_step = ("Amounts above the limit are paid only after an approver approves the ticket from "
                 "ask_for_approval.")

    def __init__(self, purpose: str, amount_cents: int) -> None:
        self.purpose, self.amount_cents = purpose, amount_cents
        super().__init__(f"No approved ticket for {dollars(amount_cents)} ({purpose}) in this conversation.")


class NotSettleable(LedgerError):
    """Only a decided ticket whose delivery failed, and not yet settled, can be settled."""

    code = "not_settleable"
    next_step = "{show} shows its state; deliver it with {deliver} while its conversation can be reached."

    def __init__(self, ticket: Ticket) -> None:
        self.ticket = ticket
        state = (
            "still pending" if ticket.status is TicketStatus.PENDING
            else "already delivered to its conversation" if ticket.delivered_at
            else f"already settled by {ticket.settled_by}" if ticket.settled_at
            else "not yet shown to be undeliverable (no delivery has failed)"
        )
        super().__init__(f"Ticket {ticket.id} is {state}; only a decision that cannot reach its "
                         "conversation is settled.", ticket_id=ticket.id)


class DatabaseFileGone(LedgerError):
    """The SQLite file this process opened was deleted or replaced while it ran (ledger/engine.py).

    Going on would split the data: this process on the old file, new
    processes on whatever is at the path now. So it stops using the database.
    """

    code = "database_file_gone"
    next_step = ("Put the file back from a backup if you have one, then {restart}: a new process uses the "
                 "file at that path, or a new, empty one if there is none.")

    def __init__(self, path: str, *, replaced: bool) -> None:
        self.path, self.replaced = path, replaced
        what = "replaced by another file" if replaced else "deleted"
        super().__init__(f"The database file {path} was {what} after this process opened it, so this "
                         "process no longer uses the database.")


DAILY_LIMIT, SAME_PURPOSE = "daily_limit", "same_purpose"


class NeedsApproval(LedgerError):
    """A payout within the threshold that the daily rules send to an approver.

    `reason` is DAILY_LIMIT (it would take the requester's total paid without
    approval on `day` above `limit_cents`) or SAME_PURPOSE (`earlier` was paid
    without approval for the same purpose that day). The message is for the
    requester; `why` is the same, for the ticket's audit trail.
    """

    code = "needs_approval"
    next_step = "Call ask_for_approval with this purpose and amount."

    def __init__(
        self, reason: str, *, requester: str, day: date, amount_cents: int, limit_cents: int,
        paid_today_cents: int, earlier: Payout | None = None,
    ) -> None:
        self.reason = reason
        self.requester = requester
        self.day = day
        self.amount_cents = amount_cents
        self.limit_cents = limit_cents
        self.paid_today_cents = paid_today_cents
        self.earlier = earlier
        amount, limit, paid = dollars(amount_cents), dollars(limit_cents), dollars(paid_today_cents)
        if reason == SAME_PURPOSE:
            what = f"{earlier.amount_text} for {earlier.purpose}" if earlier else "that"
            message = (f"You were already reimbursed {what} today (UTC) without approval, so another "
                       "reimbursement for the same purpose needs an approver.")
            self.why = (f"{earlier.amount_text} for {earlier.purpose} was already paid without approval "
                        f"to {requester} on {day} (UTC), payout {earlier.id}" if earlier else
                        f"the same purpose was already paid without approval to {requester} on {day} (UTC)")
        else:
            message = (f"You have been reimbursed {paid} today (UTC) without approval; the daily limit for "
                       f"that is {limit}, so this {amount} needs an approver." if paid_today_cents else
                       f"The daily limit for reimbursements without approval is {limit}, so this {amount} "
                       "needs an approver.")
            self.why = f"{paid} already paid without approval to {requester} on {day} (UTC); the daily limit is {limit}"
        super().__init__(message)


class NeedsNoApproval(LedgerError):
    """`ask_for_approval` for an amount that `reimburse` pays at once."""

    code = "needs_no_approval"
    next_step = "Call reimburse directly."

    def __init__(self, amount: Decimal, threshold: Decimal) -> None:
        super().__init__(f"${amount:,} is within the ${threshold:,} limit and needs no approval.")


class UnusableUserId(LedgerError):
    """A conversation whose user id is not a plain canonical name asks for money."""

    code = "invalid_user_id"
    next_step = "Start a session with such an id, e.g. alice."

    def __init__(self, user_id: str) -> None:
        self.user_id = user_id
        super().__init__(f"The user id {user_id!r} is not a plain lower-case name (letters a-z, digits and "
                         ". _ @ + -); approvals need one, so that nobody can look like somebody else.")


class LedgerUnusable(Refusal):
    """The ledger's database cannot be used at all (down, gone, or at another schema): the chat is told so."""

    code = "database_unavailable"
    next_step = "Nothing was decided or paid for this message; please try again later."

    def __init__(self, why: str) -> None:
        super().__init__(f"The expense records cannot be used right now ({why.rstrip('.')}).")


# --- what the database's schema and the settings refuse, at start ---------------------------


class SchemaError(Refusal):
    """The database's schema is not one this version can use or upgrade; the next step says what to run."""

    code = "schema_error"

    def __init__(self, current: str | None, head: str, message: str, *, next_step: str | None = None) -> None:
        self.current, self.head = current, head
        super().__init__(message, next_step=next_step)


class SchemaBehind(SchemaError):
    """The database is at an older schema, and this process may not upgrade it."""

    code = "schema_behind"
    next_step = f"Upgrade it with: {EXPENSES} migrate (or set AUTO_MIGRATE=true)."

    def __init__(self, current: str | None, head: str) -> None:
        super().__init__(current, head,
                         f"The database is at schema revision {current or 'none'}; this version needs {head}.")


class SchemaAhead(SchemaError):
    """The database is stamped with a revision this version does not know: a newer version upgraded it."""

    code = "schema_ahead"
    next_step = ("A newer version of the app has upgraded it: run that version, or restore a backup made before "
                 f"the upgrade ({EXPENSES} migrate never goes back).")

    def __init__(self, current: str, head: str) -> None:
        super().__init__(current, head, f"The database is at schema revision {current}, which this version does "
                                        f"not know; it needs {head}.")


class SchemaMismatch(SchemaError):
    """Upgrading failed because the tables are not what their revision says; nothing was changed."""

    code = "schema_mismatch"
    next_step = ("Restore a backup, or undo the partial change by hand (ledger/migrations/versions/ says what each "
                 f"revision adds), then run: {EXPENSES} migrate")

    def __init__(self, current: str | None, head: str, detail: str) -> None:
        self.detail = detail
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


# --- what the input rules refuse (ledger/inputs.py) --------------------------------


APPROVE_LESS = ("Send the amount to pay, more than zero and at most the amount asked, with a reason: "
                "{approve_less}.")


class InputError(Refusal, ValueError):
    """An input the app refuses; the message says what is wrong and what to write instead."""

    next_step = "Correct the {field} and try again."

    def __init__(self, field: str, message: str, *, missing: bool = False, next_step: str | None = None) -> None:
        """`missing`: nothing was given where something is required (a rejection's reason)."""
        if missing and next_step is None:
            next_step = "Give a {field} and try again."
        code = ("invalid_amount" if field == "amount" else "invalid_input" if field != "reason"
                else "reason_required" if missing else "invalid_body")
        super().__init__(message, next_step=next_step, code=code)
        self.field, self.missing = field, missing

    def next_for(self, actions: Actions) -> str:
        return self.next_step.replace("{field}", self.field).format_map(actions.words(self.ticket_id))


class AmountError(InputError):
    """An amount the rule refuses.

    `problem` says which part of the rule; `shown` is the amount as a person
    reads it ("$300.00"), or None when it is no readable number or too long to
    repeat; `most` is the maximum that was applied. An approver's amount
    (`approving`) has its own next step.
    """

    def __init__(self, problem: str, message: str, *, shown: str | None, most: Decimal,
                 approving: bool = False) -> None:
        super().__init__("amount", message, next_step=APPROVE_LESS if approving else None)
        self.problem, self.shown, self.most = problem, shown, most


# --- what the approval guard refuses (approval/guard.py, approval/notes.py) ------------


class NotAcceptedAnswer(Refusal):
    """A FunctionResponse that cannot resume the agent: the ledger, not the message, decides."""

    code = "answer_not_accepted"
    next_step = "Only an approver's decision answers an approval; it reaches this conversation by itself."


class NoSuchCall(NotAcceptedAnswer):
    code = "no_such_call"

    def __init__(self, call_id: str | None) -> None:
        super().__init__(f"No function call with id {call_id!r} in this conversation.")


class NotAnApproval(NotAcceptedAnswer):
    code = "not_an_approval"

    def __init__(self, name: str | None) -> None:
        super().__init__(f"{name} is not answered by the application; only approvals are.")


class NoTicketForCall(NotAcceptedAnswer):
    code = "no_ticket"

    def __init__(self) -> None:
        super().__init__("This approval call has no ticket (the request was invalid).")


class AnswerDisagrees(NotAcceptedAnswer):
    """A response that claims a decision the ledger records otherwise (approval/decisions.py)."""

    code = "answer_disagrees"
    next_step = ("Send the decision as the ledger records it ({show} shows it), or let the app deliver it: "
                 "{deliver}.")

    def __init__(self, ticket_id: str, why: str) -> None:
        super().__init__(f"The response does not agree with the ledger: {why}.", ticket_id=ticket_id)


class StillPending(Refusal):
    """Nothing to deliver, or to accept: nobody has decided the ticket yet."""

    code = "still_pending"
    next_step = "Only an approver decides it: {decide}; the decision then reaches the conversation by itself."

    def __init__(self, ticket_id: str) -> None:
        super().__init__(f"Ticket {ticket_id} is still pending.", ticket_id=ticket_id)


class AlreadyDelivered(Refusal):
    """The decision already reached its conversation (or was settled without it): a repeat changes nothing."""

    code = "already_delivered"
    next_step = "Nothing to do. {show} shows its history."

    def __init__(self, ticket: Ticket, outcome: str = "") -> None:
        """`outcome`: what the decision led to ("$250.00 was paid (payout P-...)"), when known."""
        self.ticket = ticket
        by = f" by {ticket.decided_by}" if ticket.decided_by else ""
        led_to = f": {outcome}" if outcome else ""
        if ticket.settled_at:
            message = (f"Ticket {ticket.id} was {ticket.status}{by} and then settled by {ticket.settled_by} "
                       f"without its conversation{led_to}.")
        else:
            message = (f"Ticket {ticket.id} was already {ticket.status}{by}, and the decision reached its "
                       f"conversation{led_to}.")
        super().__init__(message, ticket_id=ticket.id, code="already_settled" if ticket.settled_at else None)


class UnstorableMessage(Refusal):
    code = "invalid_characters"
    next_step = "Send it again without it."

    def __init__(self) -> None:
        super().__init__("The message has a NUL character (\\u0000) or text that is not Unicode, so it was not "
                         "stored.")


class MessageTooLong(Refusal):
    code = "too_large"
    next_step = "Send a shorter one: the purpose and the amount are enough."

    def __init__(self, size: int, most: int) -> None:
        self.size, self.most = size, most
        super().__init__(f"The message has {size:,} characters; at most {most:,} are taken.")


class ConversationInUse(Refusal):
    """A conversation with an open ticket cannot be deleted: its decision must reach it."""

    code = "conversation_in_use"
    next_step = "Wait until the tickets are decided and delivered ({show}), then delete it."

    def __init__(self, ticket_ids: list[str]) -> None:
        self.ticket_ids = ticket_ids
        super().__init__(f"This conversation cannot be deleted: it still waits for {', '.join(ticket_ids)}. "
                         "Its decision has to reach it first.", ticket_id=ticket_ids[0])


# --- a decision recorded that has not reached its conversation (approval/courier.py) --------------


class NotDelivered(Refusal):
    """The ledger holds the decision; the conversation does not have it yet, and this is why."""

    CODES: ClassVar[dict[Outcome, str]] = {
        Outcome.BUSY: "conversation_busy", Outcome.UNREACHABLE: "conversation_unreachable",
        Outcome.CONVERSATION_MISSING: "conversation_missing", Outcome.FAILED: "delivery_failed",
    }
    NEXT: ClassVar[dict[Outcome, str]] = {
        Outcome.BUSY: "Another run is using the conversation; retry shortly: {deliver}.",
        Outcome.UNREACHABLE: "It reaches the conversation when the requester next writes there. If that can "
                             "never happen, {settle} pays an approved ticket without it.",
        Outcome.CONVERSATION_MISSING: "The conversation was deleted (or started again without the call); {settle} "
                                      "pays an approved ticket without it (or closes a rejected one).",
        Outcome.FAILED: "Fix the cause (the log has the details), then deliver it: {deliver}. If it can never "
                        "arrive: {settle}.",
    }

    def __init__(self, outcome: Outcome, ticket: Ticket, detail: str, where: str,
                 retry_after: timedelta | None = None) -> None:
        self.outcome, self.ticket, self.detail, self.where, self.retry_after = (
            outcome, ticket, without_sql(detail) or "", where, retry_after)
        super().__init__(f"Ticket {ticket.id} is {ticket.status} in the ledger, but the decision has not reached "
                         f"its conversation: {self.detail}. Looked in {where}.",
                         ticket_id=ticket.id, next_step=self.NEXT[outcome], code=self.CODES[outcome])


# --- the model did not answer (model/failure.py) ----------------------------------------------


class ModelUnavailable(Refusal):
    """The model's address could not be reached, or the model's service answered with an error status.

    `kind` says which, and so what to check: "network", "credentials" (none to send),
    "key", "model", "quota", "service" (its side failed) or "refused" (any other
    error status). Its text
    (str) is the whole paragraph, the next step included: ADK shows only that
    text where a run fails (an error event in the chat, the end of an SSE stream).
    """

    code = "model_unavailable"
    # ADK names a failed run's error event by the exception's `status` (workflow/_node_runner.py).
    status = code
    # Whether a log already holds it: ADK logs one failure several times (model/failure.py).
    logged = False
    NEXT: ClassVar[dict[str, str]] = {
        "network": "Check the network between this machine and that address (a proxy, a firewall), and "
                   "GOOGLE_GEMINI_BASE_URL if you set it (unset, it is Google's); once it answers, the key "
                   "(GOOGLE_API_KEY) and the model name (AGENT_MODEL) are checked next.",
        "credentials": "Set GOOGLE_API_KEY (or GEMINI_API_KEY) to a Gemini API key "
                       "(https://aistudio.google.com/apikey); for Vertex AI, run gcloud auth application-default "
                       "login. Or unset AGENT_MODEL to run the offline model.",
        "key": "Check the key: GOOGLE_API_KEY (or GEMINI_API_KEY) must be a valid Gemini API key "
               "(https://aistudio.google.com/apikey); for Vertex AI, your credentials must be allowed to use "
               "GOOGLE_CLOUD_PROJECT. Then check the model name (AGENT_MODEL) and GOOGLE_GEMINI_BASE_URL if you "
               "set it.",
        "model": "Check the model name: AGENT_MODEL must name a model this key can use (unset, it is the "
                 "default Gemini model); then GOOGLE_GEMINI_BASE_URL, if you set it.",
        "quota": "The key's quota or rate limit is used up: wait a minute and try again, or check the quota of "
                 "the key's project.",
        "service": "The model's service failed on its side: try again in a while; if it goes on, check "
                   "GOOGLE_GEMINI_BASE_URL if you set it.",
        "refused": "Check the model name (AGENT_MODEL), the key (GOOGLE_API_KEY) and GOOGLE_GEMINI_BASE_URL if "
                   "you set it.",
    }
    WHAT: ClassVar[dict[str, str]] = {
        "network": "could not be reached at",
        "service": "failed to answer at",
        "credentials": "has no credentials to call",
    }

    def __init__(self, model: str, address: str, problem: str, kind: str) -> None:
        self.model, self.address, self.problem, self.kind = model, address, problem, kind
        what = self.WHAT.get(kind, "refused the request at")
        super().__init__(f"The model {model} {what} {address}: {problem.rstrip('.')}.", next_step=self.NEXT[kind])

    def __str__(self) -> str:
        return f"{self.message} {self.next_step}"

    @classmethod
    def parts(cls, text: str) -> tuple[str, str] | None:
        """The message and the next step of a ModelUnavailable's text, or None if `text` is not one."""
        for next_step in cls.NEXT.values():
            if text.startswith("The model ") and text.endswith(f" {next_step}"):
                return text[: -len(next_step) - 1], next_step
        return None
