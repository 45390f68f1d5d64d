"""Console transcripts in the docs, produced by the real programs and checked against them.

A block in README.md or docs/*.md marked `<!-- session: NAME -->` and fenced
as ```console holds commands (lines starting `$ `) and what they print. A test
runs the commands of a session in order, in one bash, in the session's setting
(a fresh copy of the project, a server on 127.0.0.1), and compares what they
print with the block, after normalizing what changes from run to run: ids,
times, ports and paths (a port or path the block shows stands for this run's,
in its commands too). With UPDATE_DOCS=1 it writes the fresh output into the
file instead, so a change in the programs updates the docs in one command.

A ticket id in a command (`approve T-4f307ff63d87`) stands for the ticket the
session opened, so the docs can show a real id.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

BLOCK = re.compile(r"<!-- session: (?P<name>[\w-]+) -->\n```console\n(?P<body>.*?)```", re.S)
TICKET = re.compile(r"\bT-(?:[0-9a-f]{12}\b|…)")
_MARK = "@@step@@"


@dataclass
class Step:
    command: str
    output: str


@dataclass
class Session:
    """Where a session's commands run, and what its placeholders stand for."""

    cwd: Path
    env: dict[str, str]
    ticket: str | None = None
    # Text of this run shown in the docs as something steadier (a port, a temp folder).
    shown_as: dict[str, str] = field(default_factory=dict)


def blocks(path: Path) -> dict[str, list[Step]]:
    return {m.group("name"): parse(m.group("body")) for m in BLOCK.finditer(path.read_text())}


def parse(body: str) -> list[Step]:
    steps: list[Step] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            raise ValueError(f"a transcript starts with a command: {line!r}")
        command = [line[2:]]
        # A command goes on while it ends in a backslash or leaves a quote open.
        while (command[-1].endswith("\\") or "\n".join(command).count("'") % 2) and i + 1 < len(lines):
            i += 1
            command.append(lines[i])
        output = []
        while i + 1 < len(lines) and not lines[i + 1].startswith("$ "):
            i += 1
            output.append(lines[i])
        steps.append(Step("\n".join(command), "\n".join(output)))
        i += 1
    return steps


def run(steps: list[Step], session: Session, timeout: float = 300) -> list[Step]:
    """The same commands, run for real in one bash; what each printed."""
    commands = [TICKET.sub(session.ticket, s.command) if session.ticket else s.command for s in steps]
    # What the docs show in a command stands for this run's value (`export ADK=http://127.0.0.1:8000`).
    for real, steady in session.shown_as.items():
        commands = [command.replace(steady, real) for command in commands]
    script = [f"printf '%s\\n' '{_MARK}'\n{command} 2>&1" for command in commands]
    done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=session.cwd, env=session.env,
                          capture_output=True, text=True, timeout=timeout)
    printed = done.stdout.split(_MARK + "\n")[1:]
    if len(printed) != len(steps):
        raise AssertionError(f"the session stopped early:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    shown = []
    for command, out in zip(commands, printed, strict=True):
        for real, steady in session.shown_as.items():
            command, out = command.replace(real, steady), out.replace(real, steady)
        shown.append(Step(command, out.rstrip("\n")))
    return shown


_VARIABLE = [
    (re.compile(r"\bT-[0-9a-f]{12}\b"), "T-…"),
    (re.compile(r"\bP-[0-9a-f]{12}\b"), "P-…"),
    (re.compile(r"adk-[0-9a-f-]{36}"), "adk-…"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "UUID"),
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d)?(\.\d+)?(\+00:00|Z)?"), "TIME"),
    (re.compile(r"\d{4}-\d\d-\d\d"), "DATE"),
    (re.compile(r'"age_seconds":\s*\d+'), '"age_seconds":N'),
    (re.compile(r"\b\d+m\b(?=\s+\S)"), "Nm"),  # an inbox row's age
    (re.compile(r"process \d+"), "process N"),
    (re.compile(r"\"timestamp\": [\d.]+"), '"timestamp": N'),
]


def normalize(text: str) -> str:
    for pattern, steady in _VARIABLE:
        text = pattern.sub(steady, text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def render(steps: list[Step]) -> str:
    return "".join(f"$ {s.command}\n" + (f"{s.output}\n" if s.output else "") for s in steps)


def update(path: Path, name: str, steps: list[Step]) -> None:
    """Write a session's fresh output into `path`."""
    text = path.read_text()
    for match in BLOCK.finditer(text):
        if match.group("name") == name:
            start, end = match.span("body")
            path.write_text(text[:start] + render(steps) + text[end:])
            return
    raise KeyError(name)


def updating() -> bool:
    return os.environ.get("UPDATE_DOCS") == "1"
