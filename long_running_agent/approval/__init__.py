"""The approval's hardening around ADK: what makes a long-running approval safe to rely on.

    guard.py          checks every approval FunctionResponse against the ledger (an ADK plugin)
    delivery.py       delivers a decision to its conversation, once, and says what happened
    conversations.py  where each conversation lives, so any process can reach it
    turn_order.py     what the model is shown, in the order Gemini accepts
"""
