PYTHON ?= python3
PORT ?= 8000
PYTEST_ARGS ?=
# make test spreads the suite over this many processes (pytest-xdist): many tests wait on real workers, servers
# and a browser, so one more than a 2-core machine's cores keeps both busy. TEST_PROCESSES=0 runs it in one.
TEST_PROCESSES ?= 3

VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv run dev test test-fast bench check clean

venv: $(STAMP)

# Installs again only when pyproject.toml is newer than the last install.
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e '.[dev,postgres,redis]'
	touch $(STAMP)

# gunicorn (one process per core, with threads) and the task worker, watched by scripts/serve.py.
run: venv
	PORT=$(PORT) scripts/run.sh

# The same with Django's development server, which reloads when the code changes.
dev: venv
	PORT=$(PORT) scripts/run.sh --dev

# Tests run tasks inline and keep their data in a throwaway directory; the browser tests
# (tests/e2e) need Debian's chromium, which ensure-chromium.sh installs when it is missing.
test: venv
	@scripts/ensure-chromium.sh
	@scripts/ensure-services.sh
	@data=$$(mktemp -d) && trap 'rm -rf "$$data"' EXIT && \
	EVALSITE_TASKS_SYNC=1 EVALSITE_DATA_DIR="$$data" $(PY) -m pytest -n $(TEST_PROCESSES) --dist load $(PYTEST_ARGS)

# The pure tests (the format, the engine, the upstream's conformance records, the import contracts): no
# database, browser or services; under a minute, over every core.
test-fast: venv
	@data=$$(mktemp -d) && trap 'rm -rf "$$data"' EXIT && \
	EVALSITE_TASKS_SYNC=1 EVALSITE_DATA_DIR="$$data" $(PY) -m pytest -q -n auto -m "not django_db and not services" \
	  tests/spec tests/engine tests/conformance $(PYTEST_ARGS)

bench: venv
	@set -e; for script in tests/bench/bench_*.py; do \
	  [ -e "$$script" ] || { echo "no benchmarks in tests/bench"; break; }; \
	  echo "== $$script"; $(PY) "$$script"; \
	done

check: venv
	$(PY) manage.py check

# Keeps .venv and data/ (your blueprints and runs).
clean:
	rm -rf staticfiles .pytest_cache build
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
