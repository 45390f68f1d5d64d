"""A process forked from the warm parent (tests/support/warm.py) behaves as a new interpreter running the command.

The tests that start the app's server or an approver command fork it, to save ADK's import each time; these
check that what they see is what a user's `.venv/bin/expenses` shows: the same output and exit status, exactly
the environment given, and the interpreter's exit.
"""

from __future__ import annotations

import pytest
from support.processes import run

pytestmark = pytest.mark.subprocess


@pytest.mark.parametrize("args", [
    ("inbox",),  # nothing pending: exit 0
    ("approve", "T-0123456789ab", "--approver", "bob"),  # no such ticket: exit 1, one line on stderr
    ("approve",),  # argparse's usage and exit 2
    ("show", "T-0123456789ab", "--verbose"),
])
def test_a_forked_command_says_and_exits_as_a_new_interpreter_does(sqlite_url, args):
    forked, fresh = run(*args, url=sqlite_url), run(*args, url=sqlite_url, fresh=True)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_each_forked_command_has_exactly_the_environment_it_was_given(sqlite_url):
    refused = run("inbox", url=sqlite_url, env={"APPROVAL_THRESHOLD": "-1"})
    assert refused.returncode == 1 and "APPROVAL_THRESHOLD" in refused.stderr, refused.stderr
    # The next fork starts from the warm parent, not from the one before: nothing of that setting is left.
    assert run("inbox", url=sqlite_url).returncode == 0
