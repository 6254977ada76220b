# pteforge developer entry points. `make serve` and `make test` work on a fresh machine.
# Each creates .venv at the repo root if needed and installs what it needs, once:
#   make serve  -> setup-serve: the service's runtime dependencies only
#   make check  -> setup (dev): adds the [dev] extras (pytest, ruff, mypy, the zoo's
#   make test      transformers, the /v2 clients, playwright...)
# A second run installs nothing until pyproject.toml changes (one stamp per setup).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
SERVE_STAMP := $(VENV)/.pteforge-serve-installed
DEV_STAMP := $(VENV)/.pteforge-installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: setup setup-serve serve check test lint typecheck pytest pytest-fast bench clean

setup: $(DEV_STAMP)

setup-serve: $(SERVE_STAMP)

# Re-installs only when the project's metadata changes; the editable install picks up
# source edits by itself. The dev install is a superset, so it stamps the serve one too.
$(SERVE_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	touch $(SERVE_STAMP)

$(DEV_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(SERVE_STAMP) $(DEV_STAMP)

# exec: the server replaces the recipe's shell, so Ctrl-C and SIGTERM reach it directly and
# its clean exit (status 0) is make's too.
serve: setup-serve
	exec $(BIN)/pteforge serve --host $(HOST) --port $(PORT)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy

# Both tiers run on two processes (pytest-xdist), each taking whole files in collection
# order: a package's files come one after another, so the server (and models) its
# package-scoped fixtures build start once per process. xdist's default reorders files by
# test count, which sent each process back and forth between packages and restarted the
# tests/server package's server 18 times in one run.
XDIST = -n 2 --dist loadfile --no-loadscope-reorder

# The fast tier: every test that starts no pteforge process, needs no PostgreSQL and builds
# no model-zoo model (tests/tiers.py).
pytest-fast: setup
	$(BIN)/python -m pytest --fast -q $(XDIST) $(PYTEST_ARGS)

# The full tier. The 40 slowest steps are listed at the end: where the next minutes of the
# 25-minute budget are to be found.
pytest: setup
	bash tests/run-with-postgres.sh $(BIN)/python -m pytest $(XDIST) --durations=40 $(PYTEST_ARGS)

check: lint typecheck pytest-fast

test: lint typecheck pytest

bench: setup
	$(BIN)/python bench/compile.py

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache
