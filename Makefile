# One entry point for people. `make dev` serves the whole API locally; `make test` runs every check.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed-$(shell cat requirements-dev.txt layers/recall/requirements.txt | cksum | cut -d' ' -f1)
PORT ?= 3000
FUNCTION ?= ProjectsFunction
EVENT ?= events/projects-list.json

.PHONY: install dev test lint format typecheck template-lint pytest invoke openapi bench clean

$(INSTALLED): requirements-dev.txt layers/recall/requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	rm -f $(VENV)/.installed-* && touch $@

install: $(INSTALLED)

dev: install
	PORT=$(PORT) $(PY) -m local.server

test: install lint typecheck template-lint pytest

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

typecheck: install
	$(VENV)/bin/mypy layers/recall/recall functions local bench

template-lint: install
	$(VENV)/bin/cfn-lint template.yaml

pytest: install
	$(PY) -m pytest

invoke: install
	$(PY) -m local.invoke $(FUNCTION) $(EVENT)

openapi: install
	$(PY) -m local.openapi

bench: install
	$(PY) -m bench.turns

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .hypothesis .aws-sam
