SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
TOOLS := .venv-tools
PORT ?= 3000
LAMBDA_PORT ?= 3001
AWS_PORT ?= 3002
export AWS_DEFAULT_REGION ?= us-east-1

.PHONY: run test lint bench build deploy clean

$(VENV)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (set PYTHON=python3.x, 3.11+)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

run: $(VENV)/.installed  ## serve the API on 127.0.0.1:$(PORT) over embedded moto
	$(VENV)/bin/memory-hub local --port $(PORT) --lambda-port $(LAMBDA_PORT) --aws-port $(AWS_PORT)

test: $(VENV)/.installed  ## the whole suite
	$(PY) -m pytest

lint: $(VENV)/.installed $(TOOLS)/.installed  ## cfn-lint and sam validate --lint (offline, no credentials)
	$(VENV)/bin/cfn-lint template.yaml
	$(SAM) validate --lint --region $(AWS_DEFAULT_REGION)

bench: $(VENV)/.installed  ## AWS calls per route and latency over the local stack
	$(PY) -m memory_hub_local.bench

# aws-sam-cli pins its own boto3/pydantic: it lives in a venv of its own, apart from $(VENV).
SAM_CLI_VERSION := 1.170.0
SAM := SAM_CLI_TELEMETRY=0 $(TOOLS)/bin/sam
# The interpreter that precompiles the layer's .pyc (must be CPython 3.13, the functions'
# runtime): python3.13 on PATH, else a pyenv 3.13; empty = the layer ships without .pyc.
PYTHON313 ?= $(shell for p in python3.13 $(HOME)/.pyenv/versions/3.13*/bin/python3.13; do \
	"$$p" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' >/dev/null 2>&1 && { echo "$$p"; break; }; done)

$(TOOLS)/.installed:
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (set PYTHON=python3.x, 3.11+)"; exit 1; }
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install -q --upgrade pip
	$(TOOLS)/bin/pip install -q aws-sam-cli==$(SAM_CLI_VERSION)
	touch $@

# No Docker: the layer builds with layers/core/Makefile (BuildMethod makefile; wheels fetched
# for manylinux2014_aarch64 / CPython 3.13); the functions have no requirements.txt, so SAM's
# python builder only copies their handler.
build: $(TOOLS)/.installed  ## sam build without Docker (makefile build method, cross-platform wheels)
	@cmp -s requirements.txt layers/core/requirements.txt || { \
		echo "layers/core/requirements.txt differs from requirements.txt (the layer installs the former):"; \
		echo "  cp requirements.txt layers/core/requirements.txt"; exit 1; }
	PYTHON313="$(PYTHON313)" $(SAM) build
	@$(TOOLS)/bin/python -c 'import os, sys, zipfile, io; root = ".aws-sam/build/CoreLayer"; \
		files = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]; \
		buf = io.BytesIO(); z = zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED); \
		[z.write(f, os.path.relpath(f, root)) for f in files]; z.close(); \
		print("CoreLayer: %d files, %.1f MiB unzipped, %.1f MiB zipped" % (len(files), \
		sum(os.path.getsize(f) for f in files) / 2**20, len(buf.getvalue()) / 2**20))'

# Guided the first time (writes samconfig.toml, which stays out of git); plain afterwards.
deploy: build  ## sam deploy (guided until samconfig.toml exists)
	$(SAM) deploy $(if $(wildcard samconfig.toml),,--guided)

clean:
	rm -rf $(VENV) $(TOOLS) .aws-sam
