"""What happened, provably: each ticket's hash-chained trail (chain.py), decisions' evidence, and their checks."""
