# One entry point for people. `make help` lists the targets; `make dev` serves the whole API
# locally with the light install (requirements-run.txt); `make test` runs every check with the
# full one (requirements-dev.txt, which adds the tools), with no network once it is installed.
PYTHON ?= python3
VENV ?= .venv
DEPLOY_VENV ?= .venv-deploy
SCAN_VENV ?= .venv-scan
PY := $(VENV)/bin/python
# One .venv, two stamps: the full install also stamps the light one, so a `make dev` after
# a `make test` installs nothing. Each stamp names the checksum of the pins it installed.
RUN_PINS := requirements-run.txt layers/recall/requirements.txt
DEV_PINS := requirements-dev.txt $(RUN_PINS)
RUN_INSTALLED := $(VENV)/.run-$(shell cat $(RUN_PINS) | cksum | cut -d' ' -f1)
INSTALLED := $(VENV)/.dev-$(shell cat $(DEV_PINS) | cksum | cut -d' ' -f1)
DEPLOY_INSTALLED := $(DEPLOY_VENV)/.installed-$(shell cat requirements-deploy.txt | cksum | cut -d' ' -f1)
SCAN_INSTALLED := $(SCAN_VENV)/.installed-$(shell cat requirements-scan.txt | cksum | cut -d' ' -f1)
# pytest-xdist workers for everything past the unit tests, each with its own embedded store
WORKERS ?= 2
PORT ?= 3000
FUNCTION ?= ProjectsFunction
EVENT ?= events/projects-list.json
JOB ?= drain

.DEFAULT_GOAL := help
.PHONY: help install install-run dev dev-reset job test test-rest test-web screenshots unit lint \
	commits format typecheck template-lint pytest invoke openapi docs bench bench-import eval \
	check-wheels install-deploy check-deploy install-scan scan lock clean

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# A new venv's pip first: its own (23.2 on Python 3.11) takes twice as long over the same pins.
$(RUN_INSTALLED): $(RUN_PINS)
	test -x $(PY) || { $(PYTHON) -m venv $(VENV) && $(PY) -m pip install --quiet --upgrade pip; }
	$(PY) -m pip install --quiet -r requirements-run.txt
	rm -f $(VENV)/.run-* && touch $@

$(INSTALLED): $(DEV_PINS)
	test -x $(PY) || { $(PYTHON) -m venv $(VENV) && $(PY) -m pip install --quiet --upgrade pip; }
	$(PY) -m pip install --quiet -r requirements-dev.txt
	rm -f $(VENV)/.run-* $(VENV)/.dev-* && touch $(RUN_INSTALLED) $@

install-run: $(RUN_INSTALLED) ## Create .venv with what running needs (requirements-run.txt)

install: $(INSTALLED) ## Add the checks' and the tests' tools to .venv (requirements-dev.txt)

dev: install-run ## Serve the API and the web console on http://127.0.0.1:3000 (PORT=…), the worker and the schedules; data kept in .local-data
	PORT=$(PORT) $(PY) -m local.server

dev-reset: install-run ## Like dev, but first forget what earlier runs kept (in LOCAL_DATA_DIR)
	PORT=$(PORT) $(PY) -m local.server --reset

# On the `make dev` listening on PORT (POST /_local/jobs/JOB), else on a fresh embedded store.
job: install-run ## Run one job once: JOB=consolidate|prune-sessions|expire-memories|drain
	PORT=$(PORT) $(PY) -m local.job $(JOB)

# The quick checks first, one after another (with `make -j` they run side by side), then
# the slow tests in parallel.
test: lint typecheck template-lint unit test-rest ## Every check: ruff, commits, mypy, cfn-lint, the tests (all but tests/deploy)

test-rest: install ## Integration, end-to-end, template and browser tests on WORKERS processes
	$(PY) -m pytest -n $(WORKERS) tests/integration tests/e2e tests/test_template.py tests/web

# Needs /usr/bin/chromium (the README's install step: apt-get install -y chromium).
test-web: install ## The web console in headless Chromium against make dev's server
	$(PY) -m pytest tests/web

screenshots: install ## Run the browser tests and rewrite docs/screenshots/ from what they see
	UPDATE_SCREENSHOTS=1 $(PY) -m pytest tests/web

unit: install ## Only the unit tests: no DynamoDB, about half a minute
	$(PY) -m pytest tests/unit

lint: install commits ## ruff check, ruff format --check and the commit subjects
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Needs the history since the base commit (a full clone, as CI makes).
commits: install-run ## Commit subjects since this rule began: type prefix, at most 72 characters
	$(PY) -m local.commits

format: install ## Fix what ruff can and format the code
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

typecheck: install ## mypy --strict on the package, the handlers, local/ and bench/
	$(VENV)/bin/mypy layers/recall/recall functions local bench

template-lint: install ## cfn-lint template.yaml (the SAM transform included)
	$(VENV)/bin/cfn-lint template.yaml

pytest: install ## Unit, integration, end-to-end and template tests on WORKERS processes
	$(PY) -m pytest -n $(WORKERS)

invoke: install-run ## Invoke FUNCTION with EVENT in-process, like sam local invoke
	$(PY) -m local.invoke $(FUNCTION) $(EVENT)

openapi: install-run ## Write the OpenAPI document the handlers serve
	$(PY) -m local.openapi

docs: install ## Rewrite the tables in docs/ that mirror the code: settings, parameters, modules, targets
	$(PY) -m local.docs

bench: install ## Per turn by thread length: requests, round trips, units, cost, import times; cold start per function; prefix reuse; time to first delta; erasure and large export by size; a preset's cost; the embedded store's transactions as it fills
	$(PY) -m bench.turns
	$(PY) -m bench.cold_start
	$(PY) -m bench.bytecode
	$(PY) -m bench.prompt_cache
	$(PY) -m bench.stream
	$(PY) -m bench.erase
	$(PY) -m bench.large_export
	$(PY) -m bench.presets
	$(PY) -m bench.embedded_writes

bench-import: install ## Import 1,000 threads of 50 messages through the queue: time, progress, peak memory
	$(PY) -m bench.imports

eval: install ## Precision and recall of the offline preference classifier on its labelled set
	$(PY) -m bench.eval_preferences

check-wheels: install ## The layer builds for the runtime: arm64/cp313 wheels, bytecode (needs the package index)
	$(PY) -m pytest tests/deploy

$(DEPLOY_INSTALLED): requirements-deploy.txt
	test -x $(DEPLOY_VENV)/bin/python || $(PYTHON) -m venv $(DEPLOY_VENV)
	$(DEPLOY_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(DEPLOY_VENV)/bin/python -m pip install --quiet -r requirements-deploy.txt
	rm -f $(DEPLOY_VENV)/.installed-* && touch $@

install-deploy: $(DEPLOY_INSTALLED) ## Create .venv-deploy with the SAM CLI (requirements-deploy.txt)

check-deploy: install-deploy ## sam validate --lint with the SAM CLI of .venv-deploy
	AWS_DEFAULT_REGION=$${AWS_DEFAULT_REGION:-us-east-1} SAM_CLI_TELEMETRY=0 \
		$(DEPLOY_VENV)/bin/sam validate --lint --template-file template.yaml

$(SCAN_INSTALLED): requirements-scan.txt
	test -x $(SCAN_VENV)/bin/python || $(PYTHON) -m venv $(SCAN_VENV)
	$(SCAN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SCAN_VENV)/bin/python -m pip install --quiet -r requirements-scan.txt
	rm -f $(SCAN_VENV)/.installed-* && touch $@

install-scan: $(SCAN_INSTALLED) ## Create .venv-scan with checkov (requirements-scan.txt)

# Offline once installed: --skip-download keeps checkov from fetching Prisma Cloud's
# guidelines and suppressions. Skipped checks are in each resource's Metadata, with why.
scan: install-scan ## checkov on template.yaml (its CloudFormation checks; no network)
	$(SCAN_VENV)/bin/checkov --file template.yaml --framework cloudformation \
		--skip-download --compact --quiet

# Current pins are kept (-c); to move one, delete its line in requirements-*.txt first. The
# run set is pinned first and holds in the dev set, whose file lists only what it adds.
lock: ## Re-pin requirements-run.txt and requirements-dev.txt from their .in files in a fresh venv (needs the index)
	set -e; venv=$$(mktemp -d); trap 'rm -rf "$$venv"' EXIT; \
	$(PYTHON) -m venv "$$venv"; pip="$$venv/bin/python -m pip"; \
	cat requirements-run.txt requirements-dev.txt 2>/dev/null | grep '==' > "$$venv/pins.txt" || true; \
	$$pip install --quiet -r requirements-run.in -c "$$venv/pins.txt"; \
	{ echo "# Pinned by \`make lock\` from requirements-run.in (edit that file, not this one)."; \
	  $$pip freeze; } > "$$venv/run.txt"; \
	$$pip install --quiet -r requirements-dev.in -c "$$venv/pins.txt" -c "$$venv/run.txt"; \
	{ echo "# Pinned by \`make lock\` from requirements-dev.in (edit that file, not this one)."; \
	  echo "-r requirements-run.txt"; \
	  $$pip freeze | awk -F'==' 'function name(s) { s = tolower(s); gsub(/[-_.]+/, "-", s); return s } \
	    NR == FNR { run[name($$1)]; next } !(name($$1) in run)' "$$venv/run.txt" -; \
	} > "$$venv/dev.txt"; \
	mv "$$venv/run.txt" requirements-run.txt; mv "$$venv/dev.txt" requirements-dev.txt

clean: ## Remove the venvs and the caches
	rm -rf $(VENV) $(DEPLOY_VENV) $(SCAN_VENV) .mypy_cache .ruff_cache .hypothesis .schemathesis .aws-sam
