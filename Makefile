# make demo | make test | make test-fast | make web [ARGS='--port 8080'] | make bench
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test test-fast web bench lint clean

$(VENV)/.app: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.dev: pyproject.toml $(VENV)/.app
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

demo: $(VENV)/.app
	$(PY) main.py

test: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy long_running_agent main.py
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -n auto

# The loop to run while changing code: no test that starts a process, Chromium or PostgreSQL
# (tests/support/markers.py), and a shorter search of the money invariants.
test-fast: $(VENV)/.dev
	INVARIANT_EXAMPLES=$${INVARIANT_EXAMPLES:-20} $(PY) -m pytest -n auto -m "not subprocess and not browser and not postgres"

web: $(VENV)/.app
	$(PY) -m long_running_agent.web $(ARGS)

bench: $(VENV)/.dev
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) -m benchmarks.run

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy long_running_agent main.py
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) .data .adk long_running_agent/.adk .pytest_cache .mypy_cache .ruff_cache .hypothesis .import_linter_cache
