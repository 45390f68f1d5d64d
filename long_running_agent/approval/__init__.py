"""The approval's hardening around ADK: what makes a long-running approval safe to rely on.

    guard.py          checks every approval FunctionResponse against the ledger (an ADK plugin)
    run.py            what one run needs (the desk, what was read under its lock), reached by the tools
    decisions.py      a decision as the agent receives it, and the check of one against the ledger
    holding.py        runs that deliver into a conversation someone already holds
    courier.py        takes a decision to its conversation, once, and says what happened
                      (the ledger records it: ledger/deliveries.py)
    conversations.py  where each conversation lives, so any process can reach it
    notes.py          the chat's form of a refusal: a tool's error, or the guard's note
    turn_order.py     what the model is shown, in the order Gemini accepts
"""
