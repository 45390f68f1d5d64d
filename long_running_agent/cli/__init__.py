"""The approver CLI, the `expenses` console script (`expenses --help` lists its commands)."""
