# The two commands: `make demo` runs a notebook session with an agent (offline),
# `make test` runs every check. Both set up .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint lab bench clean

# A second venv with the numpy floor pyproject.toml declares (pandas and matplotlib as pip
# resolves them beside it): the chart bins test runs there, on the oldest numpy users may have.
FLOOR_VENV ?= .venv-numpy-floor
NUMPY_FLOOR := $(shell sed -n 's/.*"numpy>=\([0-9.]*\)".*/\1/p' pyproject.toml)

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

# Runs notebooks/01-quickstart.ipynb in a fresh kernel, offline; prints the session as text and
# saves the executed notebook under build/demo/.
demo: $(VENV)/.installed
	$(BIN)/python notebooks/run.py

lint: $(VENV)/.installed
	$(BIN)/ruff check loom_nb tests bench notebooks
	$(BIN)/ruff format --check loom_nb tests bench notebooks
	$(BIN)/mypy

$(FLOOR_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip install --quiet "numpy==$(NUMPY_FLOOR)" pandas matplotlib \
		|| $(FLOOR_VENV)/bin/python -m pip install --quiet "numpy<2.3" pandas matplotlib
	touch $@

test: lint $(FLOOR_VENV)/.installed
	$(BIN)/python -m pytest

# JupyterLab opening NB, with its folder as the root (make lab NB=build/demo/01-quickstart.ipynb
# after make demo). As root (containers), --allow-root is added.
NB ?= notebooks/01-quickstart.ipynb
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)
lab: $(VENV)/.installed
	$(BIN)/jupyter lab $(LAB_ARGS) $(NB)

bench: $(VENV)/.installed
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) $(FLOOR_VENV) .loom .pytest_cache .mypy_cache
