"""Where the ledger keeps things: the engine, the tables and their migrations, the shared handle, conversation locks."""
