"""Every command README.md and docs/*.md print runs as printed, in a shell where no virtualenv was activated.

The commands are read from the docs themselves: each `$ ` line of a console block, and each inline
`code` that starts with a program. Each names a program such a shell finds (`.venv/bin/...`, a `make`
target, a system tool), with arguments that program takes; the approver CLI's and the demo's commands
then run in a fresh clone, as printed (bash reads them; support/as_printed.py). The console sessions'
outputs are checked by tests/test_docs.py, and the CLI's and the agent's own hints by tests/test_hints.py.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import tomllib
from pathlib import Path

import pytest
from support import as_printed
from support.project import cloned_project, made_venv, plain_env

from long_running_agent.cli.commands import COMMANDS
from long_running_agent.cli.entry import parser
from long_running_agent.refusals.startup import SettingsError
from long_running_agent.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
VENV_BIN = Path(__import__("sys").executable).parent
# What a shell has without the project's .venv: the system tools the docs use.
SYSTEM = {"make", "curl", "jq", "echo", "export", "cp", "kill", "time", "apt-get", "chattr", "rm", "faketime"}
# An inline command: a program, maybe after VARIABLE=value words. Bare python, pip and adk with arguments
# are caught as commands too, so that the check below can say they fail in a plain shell.
INLINE = re.compile(r"^(?:[A-Z_]+=\S+ )*(?:\.venv/bin/|make\b|pip3? |python3? |adk \w+ \S)")
SETTING = re.compile(r"^[A-Z_]+=")
# A ticket id as the docs print it (T-… stands for any); placeholders of other values.
PLACEHOLDERS = {"T-…": "T-000000000000", "TICKET": "T-000000000000", "NAME": "carol"}


def doc_commands() -> list[tuple[str, str]]:
    """(where, command) for every command the docs print."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for block in re.findall(r"```console\n(.*?)```", text, re.S):
            found += [(doc.name, line[2:]) for line in block.splitlines() if line.startswith("$ ")]
        found += [(doc.name, span) for span in re.findall(r"`([^`\n]+)`", text) if INLINE.match(span)]
    return found


def words(command: str) -> list[str]:
    """The command's words after its VARIABLE=value settings, without a trailing comment or `&`."""
    for placeholder, value in PLACEHOLDERS.items():
        command = command.replace(placeholder, value)
    try:
        split = shlex.split(command, comments=True)
    except ValueError:  # a command continued on the block's next line
        split = shlex.split(command.split("'", 1)[0], comments=True)
    while split and SETTING.match(split[0]):
        split.pop(0)
    return [word for word in split if word != "&"]


def make_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    return {target.replace("$(VENV)", ".venv") for target in re.findall(r"^([\w./$()-]+):", makefile, re.M)}


def refusal(command: str) -> str | None:
    """Why a plain shell in the project folder cannot run `command` as printed; None when it can."""
    if re.match(r"^[A-Z_0-9]+=\$\(", command):
        return None  # VARIABLE=$(curl ...): the console session runs it (tests/test_docs.py)
    program, *args = words(command) or [""]
    if program in {"python", "python3", "pip", "pip3", "adk", "expenses", "pytest"}:
        return f"`{program}` is found only in an activated virtualenv: print .venv/bin/{program}"
    if program == "make":
        unknown = [a for a in args if not a.startswith("-") and "=" not in a and a not in make_targets()]
        return f"no make target {unknown}" if unknown else None
    if program.startswith(".venv/bin/"):
        name = program.removeprefix(".venv/bin/")
        if not (VENV_BIN / name).exists():
            return f"make demo installs no {program}"
        return _arguments(name, args)
    if "=" in program or program.startswith("$") or program in SYSTEM:
        return None  # a shell assignment ($(...) included) or a system tool
    return f"{program} is neither in .venv/bin nor a system tool the docs name"


def named_only(args: list[str]) -> bool:
    """`.venv/bin/expenses` or `.venv/bin/expenses show` in a sentence: the program or a command, named."""
    return len(args) <= 1 and set(args) <= set(COMMANDS)


def _arguments(name: str, args: list[str]) -> str | None:
    if name == "expenses":
        if named_only(args):
            return None
        try:
            parser().parse_args(args)
        except SystemExit as exit_:
            return None if exit_.code == 0 else f"`expenses` refuses the arguments {args}"
        return None
    if name == "pip" and args[:1] == ["install"]:
        extras = {e for a in args for e in re.findall(r"\.\[([\w,]+)\]", a) for e in e.split(",")}
        declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
        if not re.search(r"(?:^|\s)-e\s+'?\.", " ".join(args)) and "-r" not in args:
            return "install the project from its folder (`-e '.[extra]'`): it is not on the package index"
        return f"no extra {extras - set(declared)} in pyproject.toml" if extras - set(declared) else None
    if name == "python" and args[:1] == ["-m"]:
        if importlib.util.find_spec(args[1]) is None:
            return f"no module {args[1]}"
        missing = [a for a in args[2:] if a.startswith("tests/") and not (ROOT / a.split("::")[0]).exists()]
        return f"no such tests: {missing}" if missing else None
    script = args[0] if args else ""
    if name == "python" and script not in ("main.py", "-c") \
            and not (script.startswith("examples/") and (ROOT / script).is_file()):
        return f"python {args[:1]}: the docs run main.py, an example's script or a module"
    return None


def test_the_docs_print_commands_and_this_test_reads_them_all():
    commands = doc_commands()
    assert len(commands) > 100
    assert {where for where, _command in commands} >= {"README.md", "deployment.md", "gemini.md", "slack.md",
                                                        "testing.md", "security.md", "http-api.md"}
    # What a plain shell cannot run is caught: a bare program, a make target or an extra that does not exist.
    assert refusal("python main.py") and refusal("pip install 'long-running-agent[slack]'")
    assert refusal("make tests") and refusal(".venv/bin/pip install -e '.[slak]'")
    assert refusal(".venv/bin/expenses aprove T-… --approver bob") and refusal("adk run long_running_agent")
    assert refusal(".venv/bin/python -m pytest tests/test_nothing") and not refusal("make web ARGS='--port 8081'")
    assert refusal(".venv/bin/python examples/nothing.py") and not refusal(".venv/bin/python examples/bare/main.py")


def test_every_command_the_docs_print_names_a_program_a_plain_shell_runs():
    refused = {f"{where}: {command}": why for where, command in doc_commands() if (why := refusal(command))}
    assert refused == {}


@pytest.mark.subprocess
def test_the_approver_cli_and_demo_commands_the_docs_print_run_as_printed(tmp_path):
    """Each `.venv/bin/expenses` and `.venv/bin/python main.py` command, as a fresh clone's bash runs it.

    Against a ticket that does not exist a command ends in one `error:` line; either way no shell error,
    no usage error and no traceback. Commands given a Gemini key are left out: they would reach Gemini.
    """
    project = cloned_project(tmp_path)
    made_venv(project)
    env = plain_env(tmp_path / "home", EXPENSES_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path}/docs.db")
    runnable = sorted({command.split("  #")[0] for _where, command in doc_commands()
                       if re.match(r"^(?:[A-Z_]+=\S+ )*\.venv/bin/(?:expenses|python main\.py)", command)
                       and "GOOGLE" not in command and not named_only(words(command)[1:])})
    assert len(runnable) > 15
    for placeholder, value in PLACEHOLDERS.items():
        runnable = [command.replace(placeholder, value) for command in runnable]
    for command, done in as_printed.run_each(runnable, project, env):
        said = done.stdout + done.stderr
        assert done.returncode in (0, 1, 3), f"{command}: exit {done.returncode}\n{said[-2000:]}"
        assert "Traceback" not in said and "command not found" not in said, said
        assert "usage:" not in said or command.endswith("--help"), said


# A secret where the docs show a placeholder (`<the app's Signing Secret>`): long enough for every secret setting.
FILLED = "5e1f" * 8
# What a setting shown alone leans on in the reader's .env, for the rules across settings: filled in only where
# the example leaves it unset (every name here is an approver in docs/policy.md's example).
BESIDE = {
    "SLACK_": {"SLACK_SIGNING_SECRET": FILLED, "APPROVAL_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/X",
               "APPROVAL_WEBHOOK_SECRET": FILLED, "SLACK_APPROVERS": "U012AB3CD:bob",
               "SLACK_INBOX_URL": "https://expenses.example.com/inbox"},
    "APPROVAL_WEBHOOK_URL": {"APPROVAL_WEBHOOK_SECRET": FILLED},
    "PRODUCTION_MODE": {"TRUSTED_USER_HEADER": "X-Forwarded-User"},
    "": {"APPROVERS": "bob:change-me-bob:finance,carol:change-me-carol:finance,dave:change-me-dave:cfo,"
                      "erin:change-me-erin:finance+cfo"},
}
ASSIGNMENT = re.compile(r"^([A-Z][A-Z0-9_]+)=(.*)$", re.S)


def assignments(text: str) -> dict[str, str]:
    """The `NAME=value` words of a command or a line of settings, as bash reads them (placeholders filled)."""
    try:
        split = shlex.split(re.sub(r"<[^>\n]*>", FILLED, text), comments=True)
    except ValueError:  # a command continued on the block's next line
        return {}
    return {m.group(1): m.group(2) for word in split if (m := ASSIGNMENT.match(word))}


def example_settings() -> list[tuple[str, dict[str, str]]]:
    """(where, settings) for every example of settings: a line of .env.example, a command or a code span of the
    docs, or a whole block of settings lines (```ini, ```bash), whose lines go together."""
    found = [(f".env.example:{n}", assignments(line.removeprefix("# ")))
             for n, line in enumerate((ROOT / ".env.example").read_text().splitlines(), 1)]
    for doc in sorted((ROOT / "docs").glob("*.md")):
        text = doc.read_text()
        for kind, block in re.findall(r"```(\w*)\n(.*?)```", text, re.S):
            lines = block.replace("\\\n", " ").splitlines()
            if kind == "console":
                found += [(doc.name, assignments(line[2:])) for line in lines if line.startswith("$ ")]
            elif kind in ("ini", "bash", "dotenv"):
                found.append((doc.name, {k: v for line in lines for k, v in assignments(line).items()}))
        found += [(doc.name, assignments(span)) for span in re.findall(r"`([A-Z][A-Z0-9_]+=[^`\n]*)`", text)]
    settings = {field.alias for field in Settings.model_fields.values()}
    # An empty value (`SLACK_SIGNING_SECRET=` in .env.example) is one the reader fills in.
    return [(where, shown) for where, given in found
            if (shown := {k: v for k, v in given.items() if k in settings and v})]


def test_the_docs_show_examples_of_settings_and_this_test_reads_them():
    examples = example_settings()
    assert len(examples) > 40
    shown = {name for _where, settings in examples for name in settings}
    assert {"APPROVERS", "SLACK_APPROVERS", "APPROVAL_POLICY", "EXPENSES_DATABASE_URL"} <= shown
    assert {"APPROVERS": "bob:change-me-bob", "APPROVAL_WEBHOOK_SECRET": FILLED} == assignments(
        "APPROVERS=bob:change-me-bob APPROVAL_WEBHOOK_SECRET=<the secret> make web  # a comment")


def test_every_example_setting_in_the_docs_starts_as_written(monkeypatch, tmp_path):
    """Copied as shown (with the settings it leans on set), each example loads: unique tokens, 8 characters or more."""
    # APPROVAL_POLICY=policy.toml names docs/policy.md's file, in the folder the app starts from.
    [policy] = re.findall(r"```toml\n# policy\.toml\n(.*?)```", (ROOT / "docs" / "policy.md").read_text(), re.S)
    (tmp_path / "policy.toml").write_text(policy)
    monkeypatch.chdir(tmp_path)
    refused = {}
    for where, shown in example_settings():
        beside = {name: value for prefix, values in BESIDE.items() if any(s.startswith(prefix) for s in shown)
                  for name, value in values.items()}
        with monkeypatch.context() as env:
            for name, value in (beside | shown).items():
                env.setenv(name, value)
            try:
                load_settings()
            except SettingsError as error:
                refused[f"{where}: {' '.join(f'{k}={v}' for k, v in shown.items())}"] = error.message
    assert refused == {}
