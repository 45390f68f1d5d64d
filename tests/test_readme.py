"""The README shows the real code and the real transcript."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from support.processes import ROOT, run
from support.project import demo, fresh_project

README = (ROOT / "README.md").read_text()
EXCERPTS = re.findall(r"<!-- code: (\S+) -->\n```python\n(.*?)```", README, re.S)


def test_readme_has_code_excerpts():
    assert len(EXCERPTS) >= 3


@pytest.mark.parametrize("path, code", EXCERPTS, ids=[f"{p}:{i}" for i, (p, _) in enumerate(EXCERPTS)])
def test_readme_code_excerpt_is_the_real_code(path, code):
    assert code in (ROOT / path).read_text(), f"README excerpt drifted from {path}"


def _normalise(text: str) -> list[str]:
    text = re.sub(r"adk-[0-9a-f-]{36}", "adk-ID", text)
    text = re.sub(r"\b([TP])-[0-9a-f]{12}\b", r"\1-ID", text)
    text = re.sub(r"\bpayout-[0-9a-f]{10}\b", "payout-ID", text)  # the bare example's
    text = re.sub(r"\bdemo-[0-9a-f]{6}\b", "demo-ID", text)  # the demo's employee, new on each run
    lines = [line.rstrip() for line in text.strip().splitlines()]
    return [line for line in lines if not line.startswith(("Model:", "Database:"))]


@pytest.mark.subprocess
def test_readme_transcript_matches_python_main_py(sqlite_url):
    shown = re.search(r"<!-- transcript: python main.py -->\n```text\n(.*?)```", README, re.S)
    assert shown, "the README lost its transcript"
    result = run(url=sqlite_url)
    assert result.returncode == 0, result.stderr
    assert _normalise(result.stdout) == _normalise(shown.group(1))


@pytest.mark.subprocess
def test_readme_transcript_matches_the_bare_example():
    shown = re.search(r"<!-- transcript: python examples/bare/main.py -->\n```text\n(.*?)```", README, re.S)
    assert shown, "the README lost the bare example's transcript"
    result = subprocess.run([sys.executable, "examples/bare/main.py"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert _normalise(result.stdout) == _normalise(shown.group(1))


@pytest.mark.subprocess
def test_the_demo_shows_the_database_line_the_readme_shows(tmp_path):
    """On the default database, a fresh clone's demo names it as the README does: in the project folder."""
    shown = re.search(r"<!-- transcript: python main.py -->\n```text\n.*?^(Database: .*?)$", README, re.S | re.M)
    assert shown, "the README's transcript lost its Database line"
    result = demo(fresh_project(tmp_path), tmp_path / "home")
    assert result.returncode == 0, result.stdout + result.stderr
    assert shown.group(1) in result.stdout.splitlines()


def test_run_it_names_what_make_test_needs():
    """The programs .ci/run installs from apt for the tests are in "Run it", before anyone meets a skipped test."""
    run_it = README.split("\n## Run it\n", 1)[1].split("\n## ", 1)[0]
    ci = re.search(r"apt-get install -y -qq --no-install-recommends \\\n(.*?)>", (ROOT / ".ci/run").read_text(), re.S)
    assert ci, ".ci/run no longer installs from apt as this test reads it"
    needed = {name for name in ci.group(1).split() if name != "make" and not name.startswith("fonts-")}
    assert needed == {"chromium", "curl", "jq"}
    assert all(name in run_it.lower() for name in needed) and ".ci/run" in run_it, run_it


def test_readme_lists_every_package_and_links_every_page_of_the_docs():
    layout = README.split("\n## Project layout\n", 1)[1].split("\n## ", 1)[0]
    packages = {init.parent.name for init in (ROOT / "long_running_agent").glob("*/__init__.py")} | {"examples"}
    assert {name for name in packages if f"{name}/" not in layout} == set(), layout
    more = README.split("\n## More\n", 1)[1]
    pages = {f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md")}
    assert {page for page in pages if f"]({page})" not in more} == set(), more
