"""One word per concept: a ticket answers a yes-or-no with a bool."""

from __future__ import annotations

from support.tickets import open_ticket_for

from long_running_agent.ledger import Ledger


async def test_a_ticket_says_whether_it_needs_two_approvers_with_a_bool(sqlite_url):
    ledger = Ledger(sqlite_url)
    try:
        small = await open_ticket_for(ledger, 20_000, purpose="team lunch")
        large = await open_ticket_for(ledger, 600_000)
        assert (small.needs_two_approvers, large.needs_two_approvers) == (False, True)
        assert (small.approvals_so_far, large.approvals_so_far) == ("0 of 1", "0 of 2")
        # Where the JSON shows progress, a one-approver ticket shows none.
        assert (small.approvals_shown, large.approvals_shown) == (None, "0 of 2")
        decided = await ledger.tickets.decide(large.id, approver="bob", approve=True)
        assert decided.approvals_so_far == "1 of 2" and decided.as_response()["approvals"] == "1 of 2"
    finally:
        await ledger.close()
