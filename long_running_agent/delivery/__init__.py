"""The approval's hardening around ADK: what makes a long-running approval safe to rely on (docs/security.md)."""
