# ladle — the two commands a new machine needs: `make run` and `make test`.
# The interpreter `.venv` is made from: the system's Python 3 when it is 3.11 or newer and can
# make a virtualenv (distributions build it with profile-guided and link-time optimisation),
# else the first `python3` on PATH. pyenv builds without them unless asked: on Debian 12 its
# 3.11 takes about a tenth more time and instructions for a tx.build (docs/benchmarks.md).
# `make PYTHON=...` chooses another; an existing .venv is kept (`make clean` first).
SYSTEM_PYTHON := /usr/bin/python3
PYTHON ?= $(shell $(SYSTEM_PYTHON) -c 'import sys, venv, ensurepip; \
	sys.exit(sys.version_info < (3, 11))' 2>/dev/null && echo $(SYSTEM_PYTHON) || echo python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
# The kernels (`bch`'s output bytes, the router's integer loops) compiled by mypyc
# (scripts/compile_kernels.py); without a C compiler they run interpreted, and the stamp still
# marks the attempt made.
KERNELS := router/kernels/.compiled
# The router's pure core compiled whole (`router.native`, scripts/compile_kernels.py --core),
# again when a file it may import changes; it runs interpreted where this could not be made.
NATIVE := router/.native
CORE_SOURCES := $(wildcard bch/*.py bch/*/*.py protocols/*.py protocols/*/*.py indexer/*.py \
	router/*.py router/*/*.py)

.PHONY: run test lint typecheck pytest bench clean setup browser

setup: $(STAMP) $(NODE_STAMP) $(KERNELS) $(NATIVE)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

$(KERNELS): $(STAMP) bch/kernels/source.py router/kernels/source.py scripts/compile_kernels.py
	$(BIN)/python scripts/compile_kernels.py
	touch $@

$(NATIVE): $(STAMP) $(KERNELS) $(CORE_SOURCES) scripts/compile_kernels.py
	$(BIN)/python scripts/compile_kernels.py --core
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

# The browser tests drive Debian's chromium (Playwright only drives it; it never downloads a
# browser). Installed here when missing and we are root with apt (CI is); otherwise those
# tests skip and say why.
browser:
	@if ! command -v chromium >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing Debian's chromium for the browser tests"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
				|| echo "chromium could not be installed: the browser tests will be skipped"; \
		else \
			echo "chromium missing (not root or no apt-get): the browser tests will be skipped"; \
		fi; \
	fi

# One test process per core (PYTEST_WORKERS=0 runs them in this one); a file's tests stay in
# one process, in order, so its module fixtures start once. The suite runs the router's core
# as `make run` does (compiled where it could be), then the router's tests run it interpreted.
PYTEST_WORKERS ?= auto
pytest: $(STAMP) $(NODE_STAMP) $(KERNELS) $(NATIVE) browser
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile
	LADLE_INTERPRETED=1 $(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile tests/router

test: lint typecheck pytest

run: setup
	$(BIN)/ladle up

bench: $(STAMP) $(KERNELS) $(NATIVE)
	$(BIN)/python scripts/bench_bch.py

clean:
	rm -rf $(VENV) node_modules .mypy_cache .ruff_cache .pytest_cache .hypothesis \
		.import_linter_cache .grimp_cache $(KERNELS) bch/kernels/_compiled* router/kernels/_compiled* \
		$(NATIVE) router/_native
