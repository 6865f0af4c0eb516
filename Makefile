# Two entry points for a fresh machine; each creates .venv on first use.
#   make plan   - the main job on the bundled examples
#   make test   - lint, type-check and the test suite (what CI runs)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# dstack 0.22.5, the oracle of its own format for tests/test_conformance.py, in a virtualenv of
# its own (its gpuhunt and protobuf pins clash with gpufleet's).
ORACLE := .venv-dstack

.PHONY: plan test venv oracle
venv: $(VENV)/.installed
oracle: $(ORACLE)/.installed

$(ORACLE)/.installed: tests/oracle-requirements.txt tests/oracle-constraints.txt
	$(PY) -m venv $(ORACLE)
	$(ORACLE)/bin/pip install -q --upgrade pip
	$(ORACLE)/bin/pip install -q -r tests/oracle-requirements.txt -c tests/oracle-constraints.txt
	touch $@

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

plan: venv
	$(BIN)/gpufleet plan examples/

test: venv oracle
	$(BIN)/ruff check gpufleet components policy tests bench scripts
	$(BIN)/mypy
	$(BIN)/python -m pytest
