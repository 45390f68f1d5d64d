# make demo | make test | make test-fast | make test-mutations [ARGS='--every-test --postgres'] | make test-adk [ADK='2.8.0 2.13.0'] | make web [ARGS='--port 8080'] | make bench | make screenshots
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The exact versions the tests passed with (docs/testing.md says how to refresh them).
LOCK := .ci/constraints.txt
# One worker more than the cores: the tests wait on the processes, browsers, databases and receivers they start, and
# the extra worker fills those waits (measured against one fewer and one more: docs/testing.md). A dot per test as
# it ends, then the ten slowest tests.
CORES := $(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
PYTEST_ARGS := -n $(shell echo $$(($(CORES) + 1))) --dist worksteal --durations=10
# The tests' throwaway files (a SQLite file per test, copies of the project) in memory where the machine
# has /dev/shm: SQLite syncs each commit to disk, which costs the flow tests a third of their time.
# Bytecode written even where PYTHONDONTWRITEBYTECODE is set (container images often set it): without it each
# test process compiles the tests and pytest's plugins again (hypothesis's take a while) and each process a
# test starts compiles the app. It goes to __pycache__ folders, which git ignores.
PYTEST := $(if $(wildcard /dev/shm),TMPDIR=$${TMPDIR:-/dev/shm}) PYTHONDONTWRITEBYTECODE= $(PY) -m pytest

.PHONY: demo test test-fast test-mutations test-adk web bench screenshots lint clean lock

# The virtualenv, then the project with the extras named ($(1)) at the pinned versions.
define install
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c $(LOCK) -e $(1)
endef

$(VENV)/.app: pyproject.toml $(LOCK)
	@echo "Installing the app into $(VENV) (google-adk, SQLAlchemy, FastAPI and the rest, at the versions in $(LOCK)): about a minute, once."
	$(call install,.)
	touch $@

# The app and the tests' extras in one install, which stamps the app's too: one resolution, not two.
$(VENV)/.dev: pyproject.toml $(LOCK)
	$(call install,'.[dev]')
	touch $@ $(VENV)/.app

demo: $(VENV)/.app
	$(PY) main.py

# mypy checks the types beside the suite, on the core the suite leaves idle while its tests wait; its verdict
# prints after the suite's, and either failing fails the target.
test: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	@echo "$(VENV)/bin/mypy long_running_agent main.py (beside the tests)"
	@$(VENV)/bin/mypy long_running_agent main.py > $(VENV)/mypy.log 2>&1 & types=$$!; \
		$(PYTEST) $(PYTEST_ARGS); tests=$$?; \
		wait $$types; typed=$$?; cat $(VENV)/mypy.log; test $$tests = 0 && test $$typed = 0

# The loop to run while changing code: no test marked as starting a process, Chromium or PostgreSQL
# (docs/testing.md), and a shorter search of the money invariants.
test-fast: $(VENV)/.dev
	INVARIANT_EXAMPLES=$${INVARIANT_EXAMPLES:-10} $(PYTEST) $(PYTEST_ARGS) \
		-m "not subprocess and not browser and not postgres"

# Each money defect that once shipped, put back alone into a temporary copy of the project: the invariant tests must
# fail on every one (.ci/mutants.py prints which test caught each; ARGS='--help' for its options; docs/testing.md).
test-mutations: $(VENV)/.dev
	$(PY) .ci/mutants.py $(ARGS)

# The core suite (.ci/noxfile.py) on each supported google-adk release in a virtualenv of its own,
# or on the releases named: make test-adk ADK="2.8.0 2.13.0".
test-adk: $(VENV)/.dev
	$(VENV)/bin/nox -f .ci/noxfile.py --envdir $(CURDIR)/.nox $(if $(ADK),-s $(addprefix adk-,$(ADK)),-t adk)

web: $(VENV)/.app
	$(PY) -m long_running_agent.web $(ARGS)

# The README's pictures taken again from the surfaces their captions name, in headless Chromium: docs/dev-ui.png
# from plain `adk web`, docs/inbox.png from make web's inbox (the browser tests that take them, into docs/).
screenshots: $(VENV)/.dev
	UPDATE_DOCS=1 $(PYTEST) -p no:xdist tests/test_browser.py \
		-k "plain_adk_web_request_approved or request_in_dev_ui_approved_in_inbox"

bench: $(VENV)/.dev
	$(PY) -m pip install -q -c $(LOCK) -e '.[bench]'
	$(PY) -m benchmarks.run

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy long_running_agent main.py
	$(VENV)/bin/lint-imports

# New pins: the newest releases pyproject.toml allows, in a throwaway virtualenv, frozen into $(LOCK).
# Then run make clean test test-adk and commit $(LOCK) if they pass.
lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install -q --upgrade pip
	.lock-venv/bin/python -m pip install -q -e '.[dev]'
	{ head -n 1 $(LOCK); .lock-venv/bin/python -m pip freeze --exclude-editable; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)
	rm -rf .lock-venv

# Also what plain `adk` commands and `adk eval` write at run time: an .adk folder wherever an agent's is.
clean:
	rm -rf $(VENV) .nox .data .pytest_cache .mypy_cache .ruff_cache .hypothesis .import_linter_cache
	find . -path ./.git -prune -o -type d -name .adk -prune -exec rm -rf {} +
