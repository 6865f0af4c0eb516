# Two entry points for a fresh machine; each creates .venv on first use.
#   make plan   - the main job on the bundled examples (installs the runtime only)
#   make test   - lint, type-check and the test suite, one worker per core (what CI runs;
#                 adds the test tools and the dstack and SkyPilot oracles)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# dstack 0.22.5, the oracle of its own format for tests/test_conformance.py, in a virtualenv of
# its own (its gpuhunt and protobuf pins clash with gpufleet's).
ORACLE := .venv-dstack
# SkyPilot 0.14.1, the oracle of its SSH Node Pools and task formats (tests/test_skypilot.py)
SKY_ORACLE := .venv-skypilot

.PHONY: plan test venv test-venv oracle sky-oracle
venv: $(VENV)/.runtime
test-venv: $(VENV)/.test
oracle: $(ORACLE)/.installed
sky-oracle: $(SKY_ORACLE)/.installed

$(ORACLE)/.installed: tests/oracle-requirements.txt tests/oracle-constraints.txt
	$(PY) -m venv $(ORACLE)
	$(ORACLE)/bin/pip install -q --upgrade pip
	$(ORACLE)/bin/pip install -q -r tests/oracle-requirements.txt -c tests/oracle-constraints.txt
	touch $@

$(SKY_ORACLE)/.installed: tests/sky-requirements.txt tests/sky-constraints.txt
	$(PY) -m venv $(SKY_ORACLE)
	$(SKY_ORACLE)/bin/pip install -q --upgrade pip
	$(SKY_ORACLE)/bin/pip install -q -r tests/sky-requirements.txt -c tests/sky-constraints.txt
	touch $@

# gpufleet and what it runs on (the Pulumi SDKs included): what `make plan` needs
$(VENV)/.runtime: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

# the test extra on top: pytest, hypothesis, ruff, mypy, moto, the live SDKs, matplotlib
$(VENV)/.test: $(VENV)/.runtime
	$(BIN)/pip install -q -e '.[test]'
	touch $@

plan: venv
	$(BIN)/gpufleet plan examples/

test: test-venv oracle sky-oracle
	$(BIN)/ruff check gpufleet components policy tests bench scripts
	$(BIN)/mypy
	$(BIN)/python -m pytest -n auto
