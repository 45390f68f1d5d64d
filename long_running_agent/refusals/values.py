"""What the input rules refuse (ledger/inputs.py): an amount, a name, a reason or a purpose."""

from __future__ import annotations

from decimal import Decimal

from . import Refusal

APPROVE_LESS = "Send the amount to pay, more than zero and at most the amount asked, with a reason: {approve_less}."


class InputError(Refusal, ValueError):
    """An input the app refuses; the message says what is wrong and what to write instead."""

    def __init__(self, field: str, message: str, *, missing: bool = False, next_step: str | None = None) -> None:
        if next_step is None:
            next_step = f"Give a {field} and try again." if missing else f"Correct the {field} and try again."
        code = ("invalid_amount" if field == "amount" else "invalid_input" if field != "reason"
                else "reason_required" if missing else "invalid_body")
        super().__init__(message, next_step=next_step, code=code)
        self.field = field


class AmountError(InputError):
    """An amount the rule refuses; `shown` is None when it is no readable number, or too long to repeat."""

    def __init__(self, problem: str, message: str, *, shown: str | None, most: Decimal,
                 approving: bool = False) -> None:
        super().__init__("amount", message, next_step=APPROVE_LESS if approving else None)
        self.problem, self.shown, self.most = problem, shown, most
