# Two entry points (see README.md):
#   make test   installs the package with its dev extras and runs the test suite
#   make demo   the main job: trains Multi30k EN->DE, averages, chooses the average and beam size on
#               the validation set, decodes the test set with them and scores BLEU
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
# transformer-export, the tensorboard extra those of train.tensorboard; none of their packages
# pulls in another torch. Where a package index lacks one, the rest still installs and its
# tests are skipped (they say so).
# Installs once (the package is editable: code changes need no reinstall), and again only when
# pyproject.toml changes; `make demo` and `make test` then start at once. `rm .venv/.installed`
# forces it.
install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(MAKE) venv
	$(PY) -m pip install -q -e ".[dev]"
	@echo "make: installing the optional export extra (ctranslate2, transformers)"
	@$(PY) -m pip install -q -e ".[export]" || echo "make: the export extra could not be installed: its parity tests are skipped"
	@echo "make: installing the optional tensorboard extra"
	@$(PY) -m pip install -q -e ".[tensorboard]" || echo "make: the tensorboard extra could not be installed: the train.tensorboard tests are skipped"
	touch $@

# Default test run: everything except GPU tests (slow real-data tests included, about 10 minutes
# on 2 CPU cores). Real data: ../shared/data, or $TRANSFORMER_DATA_DIR.
test: install
	$(PY) -m pytest -q -m "not gpu" tests

lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

demo: install
	$(PY) scripts/quickstart.py $(DEMO_ARGS)
