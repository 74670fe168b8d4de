# The two commands: `make demo` runs a notebook session with an agent (offline),
# `make test` runs every check. Both set up .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint lab bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/python -m loom_nb.demo

lint: $(VENV)/.installed
	$(BIN)/ruff check loom_nb tests bench
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest

lab: $(VENV)/.installed
	$(BIN)/jupyter lab notebooks/

bench: $(VENV)/.installed
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .loom .pytest_cache .mypy_cache
