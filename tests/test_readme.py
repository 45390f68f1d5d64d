"""The README shows the real code and the real transcript."""

from __future__ import annotations

import re

import pytest
from support.processes import ROOT, run

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
    lines = [line.rstrip() for line in text.strip().splitlines()]
    return [line for line in lines if not line.startswith(("Model:", "Database:"))]


def test_readme_transcript_matches_python_main_py(sqlite_url):
    shown = re.search(r"<!-- transcript: python main.py -->\n```text\n(.*?)```", README, re.S)
    assert shown, "the README lost its transcript"
    result = run(url=sqlite_url)
    assert result.returncode == 0, result.stderr
    assert _normalise(result.stdout) == _normalise(shown.group(1))


def test_readme_is_a_short_tutorial():
    # The reference lives in docs/; the README stays readable in ten minutes.
    assert len(README) <= 15_000, f"README.md has {len(README):,} characters; move detail to docs/"
