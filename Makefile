# pteforge developer entry points. `make serve` and `make test` work on a fresh machine:
# both depend on `make setup`, which creates .venv at the repo root and is idempotent.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.pteforge-installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: setup serve test lint typecheck pytest bench clean

setup: $(STAMP)

# Re-installs only when the project's metadata changes; the editable install picks up
# source edits by itself.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

serve: setup
	$(BIN)/pteforge serve --host $(HOST) --port $(PORT)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy

pytest: setup
	bash tests/run-with-postgres.sh $(BIN)/python -m pytest $(PYTEST_ARGS)

test: lint typecheck pytest

bench: setup
	$(BIN)/python bench/compile.py

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache
