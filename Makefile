# Two entry points (see README.md):
#   make test   installs the package with its dev extras and runs the test suite
#   make demo   the main job: trains Multi30k EN->DE, averages, decodes with beam 4 and scores BLEU
#               (DEMO_ARGS="--direction de-en" for the other direction)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: venv install test test-all demo lint

venv:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0 || $(PY) -m pip install -q torch

# The export extra (ctranslate2, transformers) lets the test run include the parity tests of
# transformer-export; none of its packages pulls in another torch. Where a package index lacks
# it, the rest still installs and those tests are skipped (they say so).
install: venv
	$(PY) -m pip install -q -e ".[dev]"
	$(PY) -m pip install -q -e ".[export]" || echo "make: the export extra (ctranslate2, transformers) could not be installed: its parity tests are skipped"

# Default test run: everything except GPU tests (slow real-data tests included, about 5 minutes
# on 2 CPU cores). Real data: ../shared/data, or $TRANSFORMER_DATA_DIR.
test: install
	$(PY) -m pytest -q -m "not gpu" tests

lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

demo: install
	$(PY) scripts/quickstart.py $(DEMO_ARGS)
