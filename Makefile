# Two entry points for a fresh machine; each creates .venv on first use.
#   make plan   - the main job on the bundled examples
#   make test   - lint, type-check and the test suite (what CI runs)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: plan test venv
venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

plan: venv
	$(BIN)/gpufleet plan examples/

test: venv
	$(BIN)/ruff check gpufleet components policy tests bench scripts
	$(BIN)/mypy
	$(BIN)/python -m pytest
