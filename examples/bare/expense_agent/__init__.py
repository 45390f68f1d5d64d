"""The bare long-running-tool pattern as an ADK agent package: `.venv/bin/adk web examples/bare` lists it."""

from . import agent  # noqa: F401  (ADK's loader finds `root_agent` in it)
