"""The core suite on each supported google-adk release, each in a virtualenv of its own.

Run with: make test-adk                        (every release in RELEASES, one after another)
          make test-adk ADK="2.8.0 2.13.0"     (the releases named)
          .venv/bin/nox -f .ci/noxfile.py -s adk-2.8.0   (one, without make)

Each session installs the project, its `test` extra and one google-adk
release, every other package at the version .ci/constraints.txt pins; only the
packages an ADK release pins itself (FOLLOW_ADK) are left to pip. A session
that fails makes nox, and so `make test-adk` and CI, exit non-zero.
"""

from __future__ import annotations

from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent.parent  # the project: this file lives in .ci/

# Every google-adk 2.x release the project supports (pyproject.toml's range), oldest first.
RELEASES = ["2.8.0", "2.9.0", "2.9.1", "2.9.2", "2.10.0", "2.11.0", "2.12.0", "2.13.0"]

# What the app promises on every release: the seed flow, the guard, exactly-once
# delivery, plain `adk api_server` with no flags, the Gemini wire format, the A2A
# endpoint, and what the app assumes of ADK's private parts.
CORE_SUITE = [
    "tests/test_adk_compat.py",
    "tests/test_flow.py",
    "tests/test_guard.py",
    "tests/test_delivery_crash.py",
    "tests/test_plain_adk.py",
    "tests/test_gemini_wire.py",
    "tests/test_a2a_tasks.py",  # the A2A endpoint: ADK's Runner and its converter of a client's parts
]

# Each google-adk release bounds OpenTelemetry itself (2.8 to 2.12 allow up to
# 1.42.1); the semantic conventions follow the SDK exactly,
# and FastAPI 0.142+ needs OpenTelemetry 1.44, so before 2.13 FastAPI is 0.141; so does google-api-core 2.44+
# (a2a-sdk's), so before 2.13 it is older too.
FOLLOW_ADK = {
    "google-adk", "opentelemetry-api", "opentelemetry-sdk", "opentelemetry-semantic-conventions", "fastapi",
    "google-api-core",
}

nox.options.error_on_missing_interpreters = True


def _constraints(session: nox.Session) -> str:
    """constraints.txt without the packages the ADK release chooses."""
    kept = [
        line for line in (ROOT / ".ci" / "constraints.txt").read_text().splitlines()
        if line.split("==")[0].strip().lower().replace("_", "-") not in FOLLOW_ADK
    ]
    path = Path(session.create_tmp()) / "constraints.txt"
    path.write_text("\n".join(kept) + "\n")
    return str(path)


def _core_suite(session: nox.Session, release: str) -> None:
    session.chdir(ROOT)  # nox starts in the folder of this file
    session.install("-c", _constraints(session), "-e", ".[test]", f"google-adk=={release}")
    session.run("python", "-c", "import google.adk; print('google-adk', google.adk.__version__)")
    session.run("python", "-m", "pytest", "-n", "2", "-q", "-p", "no:cacheprovider", *CORE_SUITE, *session.posargs,
                env={"INVARIANT_EXAMPLES": "20"})


def _session_for(release: str) -> None:
    def core_suite(session: nox.Session) -> None:
        _core_suite(session, release)

    core_suite.__doc__ = f"The core suite on google-adk {release}."
    nox.session(name=f"adk-{release}", tags=["adk"])(core_suite)


for _release in RELEASES:
    _session_for(_release)
