# ladle — the two commands a new machine needs: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NODE_STAMP := node_modules/.installed

.PHONY: run test lint typecheck pytest bench clean setup

setup: $(STAMP) $(NODE_STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy .

pytest: $(STAMP) $(NODE_STAMP)
	$(BIN)/pytest -q

test: lint typecheck pytest

run: setup
	$(BIN)/ladle up

bench: $(STAMP)
	$(BIN)/python scripts/bench_bch.py

clean:
	rm -rf $(VENV) node_modules .mypy_cache .ruff_cache .pytest_cache .hypothesis \
		.import_linter_cache .grimp_cache
