"""Every command the CLI and the agent print runs as printed: from the project folder, in a shell where nothing
was activated, as a new user runs it after `make demo`.

The hints come from runs of `expenses` and `main.py` (each place the CLI and the demo name a next command)
and from the catalogue of refusals as the CLI and the chat word them; each is then run as printed: bash reads
it, and each program's first one runs as a process of that shell (support/as_printed.py).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from support import as_printed
from support.project import fresh_project, made_venv, plain_env

from long_running_agent.cli.render import CLI
from long_running_agent.delivery.notes import CHAT
from long_running_agent.refusals import Refusal

pytestmark = pytest.mark.subprocess

# A command as the project prints it: the program, then its words up to the prose around it.
COMMAND = re.compile(r"\.venv/bin/(?:python (?:-c '[^']*'|main\.py(?: --text '[^']*')?)|expenses(?: [a-z]+)?)"
                     r"(?: (?:T-[0-9a-f]{12}|TICKET|--[a-z]+(?: '[^']*'| [\w-]+)?|'[^']*'))*")
# The program without its path: what fails in a shell where the project's .venv was not activated.
BARE = re.compile(r"(?<![\w/.])python3? (?:main\.py|-m |-c )")
PLACEHOLDERS = {"NAME": "carol", "TICKET": "{ticket}"}


def test_every_command_the_cli_and_the_agent_print_runs_as_printed(tmp_path):
    project, env = _clone(tmp_path)
    printed = []

    def expenses(*args: str, **extra: str) -> str:
        program = ".venv/bin/python main.py" if args[0].startswith("-") else ".venv/bin/expenses"
        done = as_printed.run(" ".join([program, *args]), project, env | extra)
        assert "Traceback" not in done.stderr, done.stderr
        printed.append(done.stdout + done.stderr)
        return printed[-1]

    lunch = _ticket(expenses("request", "'Reimburse $250 for the team lunch'"))  # who approves it
    sponsorship = _ticket(expenses("request", "'Reimburse $6,000 for the conference sponsorship'"))
    expenses("request", "'Reimburse $0 for a pen'")  # refused: how to write a request
    expenses("inbox", "--limit", "1")  # the next page
    expenses("inbox", "--offset", "60")  # past the end: the last page
    expenses("approve", sponsorship, "--approver", "bob")  # the first of two approvals: who decides next
    expenses("approve", sponsorship, "--approver", "bob")  # refused: a second approver
    expenses("--text", "'Reimburse $250 EUR for the hotel'")  # the demo asks a question
    expenses("--text", "'Reimburse $6,000 for a server'")  # the demo leaves a ticket to a second approver
    expenses("inbox", APPROVAL_WEBHOOK_URL="http://127.0.0.1:9/hook")  # a setting refused: how to make a secret
    # Each refusal's next step, as the CLI and the chat (the agent's tool errors) word it.
    for actions in (CLI, CHAT):
        printed.extend(getattr(actions, field).format(ticket=lunch) for field in vars(actions))
    printed.extend(r.next_step for r in _catalogue() if isinstance(r.next_step, str))
    text = "\n".join(printed)

    assert BARE.findall(text) == [], "a hint names a program a shell without the .venv activated cannot run"
    assert re.findall(r"(?<![\w/.])expenses [a-z]", text.replace(".venv/bin/expenses", "")) == [], text
    hints = {_filled(command, lunch) for command in COMMAND.findall(text)}
    named = {re.sub(r"\.venv/bin/(?:python (?:main\.py )?|expenses )(-c|--text|[a-z]+).*", r"\1", hint,
                    flags=re.S) for hint in hints}
    assert named >= {"request", "inbox", "approve", "show", "deliver", "settle", "migrate", "--text", "-c"}, hints
    for hint, done in as_printed.run_each(sorted(hints), project, env):
        # It ran: the shell found the program, Python the project, argparse the words; a refusal is one line.
        assert done.returncode not in (2, 126, 127), (hint, done.stderr)
        assert "Traceback" not in done.stderr and "No module named" not in done.stderr, (hint, done.stderr)
        assert done.returncode in (0, 3) or done.stderr.strip().startswith("error:"), (hint, done.stderr)


def _clone(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A fresh clone after `make demo`, and the environment of a shell where its .venv was never activated."""
    project = fresh_project(tmp_path)
    made_venv(project)
    venv_bin = {str(Path(sys.executable).parent), str(Path(sys.executable).resolve().parent)}
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and p not in venv_bin and ".venv" not in Path(p).parts)
    env = {k: v for k, v in plain_env(tmp_path / "home").items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    return project, env | {"PATH": path}


def _ticket(printed: str) -> str:
    match = re.search(r"Ticket (T-[0-9a-f]{12}) is pending", printed)
    assert match, printed
    return match.group(1)


def _filled(command: str, ticket: str) -> str:
    for placeholder, value in PLACEHOLDERS.items():
        command = re.sub(rf"\b{placeholder}\b", value, command)
    return command.replace("{ticket}", ticket)


def _catalogue() -> list[type[Refusal]]:
    """Every kind of refusal, subclasses of subclasses too."""
    kinds = Refusal.__subclasses__()
    for kind in kinds:  # grows while it is walked
        kinds.extend(kind.__subclasses__())
    return kinds
