"""How the package is found and configured: ADK's loader, model choice, settings, policy."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from google.adk.apps import App
from google.adk.cli.utils.agent_loader import AgentLoader
from google.adk.tools import LongRunningFunctionTool
from support.processes import ROOT
from support.project import ADK, cloned_project, ignored_by_git, plain_env

from long_running_agent.ledger import inputs
from long_running_agent.ledger.inputs import InputError
from long_running_agent.model.choice import GEMINI_DEFAULT, choose_model
from long_running_agent.settings import Settings, SettingsError, load_settings, model_settings


async def test_adk_loader_finds_the_app_with_its_guard_like_adk_web():
    loader = AgentLoader(str(ROOT))
    # Only the agent: tests/ and benchmarks/ are not packages, so ADK lists neither.
    assert loader.list_agents() == ["long_running_agent"]
    loaded = loader.load_agent("long_running_agent")
    assert isinstance(loaded, App) and loaded.name == "long_running_agent"
    assert [p.name for p in loaded.plugins] == ["approval_guard"]
    # The tools as ADK declares them to the model (a plain function becomes a FunctionTool).
    tools = {t.name: t for t in await loaded.root_agent.canonical_tools()}
    assert set(tools) == {"ask_for_approval", "reimburse", "withdraw_request"}
    assert isinstance(tools["ask_for_approval"], LongRunningFunctionTool) and tools["ask_for_approval"].is_long_running
    assert not tools["reimburse"].is_long_running


@pytest.mark.parametrize("env, name, reason", [
    ({}, "offline-expense-model", "no GOOGLE_API_KEY"),
    ({"GOOGLE_API_KEY": "k"}, GEMINI_DEFAULT, "GOOGLE_API_KEY"),
    ({"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": "p"}, GEMINI_DEFAULT, "Vertex AI project p"),
    ({"GOOGLE_GENAI_USE_VERTEXAI": "true"}, "offline-expense-model", "no GOOGLE_API_KEY"),
    ({"GOOGLE_GENAI_USE_ENTERPRISE": "1", "GOOGLE_CLOUD_PROJECT": "p"}, GEMINI_DEFAULT, "Vertex AI project p"),
    ({"AGENT_MODEL": "gemini-2.5-pro"}, "gemini-2.5-pro", "calls will fail"),
    ({"AGENT_MODEL": "gemini-2.5-pro", "GOOGLE_API_KEY": "k"}, "gemini-2.5-pro", "AGENT_MODEL is set"),
])
def test_model_choice_says_which_model_runs_and_why(monkeypatch, env, name, reason):
    monkeypatch.delenv("AGENT_MODEL", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    choice = choose_model(model_settings())
    assert choice.name == name and reason in choice.reason


SETTINGS = load_settings()


@pytest.mark.parametrize("value, expected", [
    (250, Decimal("250.00")), (42.5, Decimal("42.50")), ("1,250.50", Decimal("1250.50")), ("$12", Decimal("12.00")),
])
def test_amounts_are_parsed_to_cents(value, expected):
    assert inputs.amount(value, most=SETTINGS.max_amount) == expected


@pytest.mark.parametrize("value, message", [
    (0, "more than zero"), (-5, "more than zero"), (float("nan"), "finite"), (float("inf"), "finite"),
    ("abc", "not a number"), (True, "number of dollars"), (None, "number of dollars"),
    (2_000_000, "limit"), (1.005, "fractions of a cent"),
])
def test_bad_amounts_are_refused_with_a_hint(value, message):
    with pytest.raises(InputError, match=message):
        inputs.amount(value, most=SETTINGS.max_amount)


@pytest.mark.parametrize("value, message", [
    (100.009, "100.009 has fractions of a cent"), ("100.009", "100.009 has fractions of a cent"),
    (250.999, "250.999 has fractions of a cent"), (1e-7, "has fractions of a cent"),
    ("1e2", "'1e2' is not a number of dollars and cents"), ("1e309", "'1e309' is not a number of dollars"),
    ("Infinity", "not a number of dollars"), ("NaN", "not a number of dollars"),
    ("1_000", "not a number of dollars"), ("1 000", "not a number of dollars"), ("250 EUR", "not a number of dollars"),
])
def test_more_than_two_decimals_and_exponents_are_refused_with_what_to_write(value, message):
    with pytest.raises(InputError, match=message) as refusal:
        inputs.amount(value, most=SETTINGS.max_amount)
    assert "e.g." in str(refusal.value)


def test_purpose_is_required_and_normalised():
    assert inputs.purpose("  team   lunch ") == "team lunch"
    for bad in ("", "   ", None, "x" * 400):
        with pytest.raises(InputError):
            inputs.purpose(bad)


@pytest.mark.parametrize("name, value", [
    ("APPROVAL_THRESHOLD", "-1"), ("MAX_REIMBURSEMENT", "nan"), ("APPROVAL_TTL_HOURS", "soon"),
    ("APPROVERS", "bob"),
    # Accepted once, then every ticket failed (OverflowError), or start-up crashed.
    ("APPROVAL_TTL_HOURS", "1e8"), ("APPROVAL_TTL_HOURS", "1e30"), ("APPROVAL_TTL_HOURS", "0"),
    ("MAX_REIMBURSEMENT", "1e20"), ("APPROVAL_THRESHOLD", "5000000"), ("EXPIRY_SWEEP_SECONDS", "0"),
    ("APPROVERS", "bob:short"), ("APPROVERS", "bob:same-token,carol:same-token"),
    ("APPROVERS", "b\u200bob:long-enough-token"), ("APPROVERS", "\u0430lice:long-enough-token"),
    ("DEV_CHAT_APPROVAL", "maybe"), ("PRODUCTION_MODE", "true"),
    ("DAILY_AUTO_APPROVAL_LIMIT", "-1"), ("DAILY_AUTO_APPROVAL_LIMIT", "lots"),
    ("DAILY_AUTO_APPROVAL_LIMIT", "12.345"), ("DAILY_AUTO_APPROVAL_LIMIT", "inf"),
    # Once an OverflowError's traceback at start.
    ("APPROVAL_REMIND_BEFORE_HOURS", "1e30"), ("APPROVAL_REMIND_BEFORE_HOURS", "-1"),
    ("AUTO_MIGRATE", "sometimes"), ("APPROVAL_WEBHOOK_TIMEOUT_SECONDS", "0"),
])
def test_bad_settings_name_the_variable(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=name):
        load_settings()


@pytest.mark.parametrize("name", sorted(field.alias for field in Settings.model_fields.values()))
@pytest.mark.parametrize("value", ["x", "1e30", "-1e999", " ", "1,5", "{}", "\u00e9:\u00e9"])
def test_any_value_of_any_setting_is_taken_or_refused_by_name(monkeypatch, name, value):
    """Never pydantic's own error, a traceback, or a refusal that does not say which variable to change."""
    monkeypatch.setenv(name, value)
    try:
        load_settings()
    except SettingsError as refusal:
        said = str(refusal)
        assert said.startswith(name) and "\n" not in said and "validation error" not in said, said


def test_settings_are_frozen():
    with pytest.raises((AttributeError, ValueError)):
        load_settings().approval_threshold = Decimal("1")  # type: ignore[misc]


def test_approvers_are_parsed_from_name_token_pairs_with_their_groups(monkeypatch):
    monkeypatch.setenv("APPROVERS", "Bob :tok-bbbbbb, carol:tok-cccccc:Finance+cfo")
    # Names in their one canonical spelling, as the ledger compares them; everyone is in the group "approvers".
    approvers = load_settings().approvers
    assert {token: (a.name, sorted(a.groups)) for token, a in approvers.items()} == {
        "tok-bbbbbb": ("bob", ["approvers"]), "tok-cccccc": ("carol", ["approvers", "cfo", "finance"])}


@pytest.mark.parametrize("value, limit", [
    (None, Decimal("250")), ("0", Decimal("0")), ("1,000", None), ("99.50", Decimal("99.50")),
])
def test_daily_auto_approval_limit_is_dollars_and_zero_is_allowed(monkeypatch, value, limit):
    if value is not None:
        monkeypatch.setenv("DAILY_AUTO_APPROVAL_LIMIT", value)
    if limit is None:
        with pytest.raises(SettingsError, match="DAILY_AUTO_APPROVAL_LIMIT"):
            load_settings()
    else:
        assert load_settings().daily_auto_approval_limit == limit


def test_every_file_the_package_reads_is_in_its_package_data():
    """An installed copy (pip install .) has the inbox's files and the migrations, not only the modules."""
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    package = ROOT / "long_running_agent"
    missing = []
    for path in package.rglob("*"):
        # What `adk web`, `adk run` and `adk eval` write at run time (.adk/) is ignored by git, never packaged.
        if path.is_dir() or ignored_by_git(path, ROOT):
            continue
        if path.suffix == ".py" and (path.parent / "__init__.py").exists():
            continue  # a module of a package: setuptools finds it
        owner = next(p for p in [path.parent, *path.parent.parents] if (p / "__init__.py").exists())
        patterns = declared.get(".".join(owner.relative_to(ROOT).parts), [])
        if not any(path.relative_to(owner).match(pattern) for pattern in patterns):
            missing.append(str(path.relative_to(ROOT)))
    assert missing == [], ("add these to [tool.setuptools.package-data] in pyproject.toml, or, if the app writes "
                           "them at run time, to .gitignore and `make clean`")


def test_the_approver_cli_is_the_console_script_the_hints_name():
    """`pip install .` makes `expenses` ([project.scripts]), the command every hint names as .venv/bin/expenses."""
    import tomllib
    from importlib.metadata import entry_points

    from long_running_agent.cli import entry
    from long_running_agent.names import EXPENSES

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"expenses": "long_running_agent.cli.entry:main"}
    assert EXPENSES == ".venv/bin/expenses"
    # This venv's installed copy points at the same function (a stale install would not).
    [installed] = entry_points(group="console_scripts", name="expenses")
    assert installed.value == scripts["expenses"] and installed.load() is entry.main
    assert Path(sys.executable).with_name("expenses").is_file()  # pip put it beside this Python


def test_every_setting_the_code_reads_is_documented_in_env_example():
    read = {field.alias for field in Settings.model_fields.values()}  # each field's variable
    for source in (ROOT / "long_running_agent").rglob("*.py"):
        text = source.read_text()
        read |= set(re.findall(r'getenv\(\s*"([A-Z][A-Z0-9_]+)"', text))
        read |= set(re.findall(r'"(GOOGLE_GENAI_USE_[A-Z]+)"', text))
    assert {"APPROVAL_WEBHOOK_URL", "DUAL_APPROVAL_ABOVE", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_API_KEY"} <= read
    documented = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    assert read - documented == set(), "add these to .env.example, with what they do"


def _requirements(extra: str | None, declared: dict) -> set[str]:
    """The distributions `pip install .[extra]` asks for by name, this project's own extras followed."""
    wanted = declared["dependencies"] + (declared["optional-dependencies"][extra] if extra else [])
    names = set()
    for requirement in wanted:
        name = re.match(r"[A-Za-z0-9._-]+", requirement)[0]
        if _normal(name) == "long-running-agent":
            for included in re.findall(r"[a-z]+", requirement.split("[", 1)[1]):
                names |= _requirements(included, declared)
        else:
            names.add(_normal(name))
    return names


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imports(folder: Path, skip: list[Path] = ()) -> set[str]:
    """The modules a folder's code imports by absolute name (leaving out the folders in `skip`)."""
    modules = set()
    for source in [folder] if folder.is_file() else folder.rglob("*.py"):
        if any(source.is_relative_to(part) for part in skip):
            continue
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module)
    return modules


# Parts of the package that need an extra, and import it only there (the core app runs without it).
OPTIONAL_PARTS = {"long_running_agent/slack": "slack", "long_running_agent/observability/tracing.py": "otel"}


@pytest.mark.parametrize("code, extra", [
    ("long_running_agent", None), ("main.py", None), ("benchmarks", "bench"), ("tests", "dev"),
    *OPTIONAL_PARTS.items(),
])
def test_every_package_the_code_imports_is_declared(code, extra):
    """`pip install .` brings what the app imports itself, not only what google-adk happens to bring."""
    import tomllib
    from importlib.metadata import packages_distributions

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    ours = {p.stem for folder in (ROOT, ROOT / "tests", ROOT / "benchmarks") for p in folder.iterdir()}
    installed = packages_distributions()
    missing = set()
    skipped = [ROOT / part for part in OPTIONAL_PARTS if part != code]  # checked against their extra
    for module in _imports(ROOT / code, skip=skipped):
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top in ours:
            continue
        candidates = [_normal(d) for d in installed.get(top, [top])]
        if len(candidates) > 1:  # a namespace package: google.adk is google-adk; opentelemetry.trace, -api's
            parts = module.split(".")
            # google.protobuf is protobuf's: a namespace's module may be named for its distribution alone.
            named = {_normal("-".join(parts[:n])) for n in range(1, len(parts) + 1)} | {_normal(parts[1:2][0] if
                                                                                             parts[1:] else top)}
            candidates = [d for d in candidates if d in named] or [d for d in candidates if d == f"{top}-api"]
        if not set(candidates) & _requirements(extra, declared):
            missing.add(" or ".join(candidates) or f"the distribution of {module}")
    assert missing == set(), f"declare these in pyproject.toml, for {code}"


def test_every_file_the_project_names_is_in_the_project():
    """A comment, page or link that sends the reader to a file sends them to one of this project's own."""
    sources = [ROOT / "README.md", ROOT / "main.py", ROOT / "Makefile", ROOT / ".env.example", *(
        path for folder in ("long_running_agent", "tests", "docs", "benchmarks") for path in (ROOT / folder).rglob("*")
        if path.suffix in {".py", ".md", ".html", ".js", ".css", ".ini", ".mako"} and "__pycache__" not in path.parts
    )]
    # Paths from the project folder; .adk/ and .data/ hold what a run writes, not the project's files.
    named = re.compile(r"\b(?:long_running_agent|tests|docs|benchmarks)(?:/\w[\w-]*)+(?:\.[a-z]+)+\b")
    linked = re.compile(r"\]\((?!https?:|mailto:|#)([^)#\s]+)")
    wrong = []
    for source in sources:
        text = source.read_text()
        for path in named.findall(text):
            if not (ROOT / path).exists():
                wrong.append(f"{source.relative_to(ROOT)}: {path}")
        for link in linked.findall(text) if source.suffix == ".md" else []:
            target = (source.parent / link).resolve()
            if not target.exists() or not target.is_relative_to(ROOT):
                wrong.append(f"{source.relative_to(ROOT)}: ({link})")
    assert wrong == []


@pytest.mark.subprocess
def test_what_plain_adk_writes_in_the_package_is_ignored_kept_out_of_its_tests_and_removed_by_make_clean(tmp_path):
    project, home = cloned_project(tmp_path), tmp_path / "home"
    # `adk run` keeps its conversations in long_running_agent/.adk/session.db, as `adk web` does;
    # `adk eval` keeps its results in long_running_agent/eval/.adk/eval_history/.
    ran = subprocess.run([str(ADK), "run", "long_running_agent"], cwd=project,
                         env=plain_env(home), input="exit\n", capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    history = project / "long_running_agent" / "eval" / ".adk" / "eval_history"
    history.mkdir(parents=True)
    (history / "long_running_agent_expense_flow_1.evalset_result.json").write_text("{}")
    written = sorted(str(p.relative_to(project)) for p in project.rglob(".adk/**/*") if p.is_file())
    assert "long_running_agent/.adk/session.db" in written, written

    checked = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              "tests/test_package.py::test_every_file_the_package_reads_is_in_its_package_data"],
                             cwd=project, capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout[-3000:]
    cleaned = subprocess.run(["make", "clean"], cwd=project, capture_output=True, text=True, timeout=120)
    assert cleaned.returncode == 0, cleaned.stderr
    assert [p for p in project.rglob(".adk") if p.is_dir()] == []


@pytest.mark.parametrize("url, async_form", [
    ("sqlite:///.data/expenses.db", "sqlite+aiosqlite:///.data/expenses.db"),
    ("postgresql://user@127.0.0.1/expenses", "postgresql+asyncpg://"),
    ("postgresql+psycopg2://user@127.0.0.1/expenses", "postgresql+asyncpg://"),
])
def test_a_database_url_with_a_blocking_driver_is_refused_with_its_async_form(monkeypatch, url, async_form):
    """Once accepted, then every command failed with SQLAlchemy's "The asyncio extension requires an async driver"."""
    monkeypatch.setenv("EXPENSES_DATABASE_URL", url)
    with pytest.raises(SettingsError, match="EXPENSES_DATABASE_URL") as refusal:
        load_settings()
    assert async_form in str(refusal.value) and "user@" not in str(refusal.value), str(refusal.value)
