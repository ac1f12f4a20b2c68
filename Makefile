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

lint: $(VENV)/.installed $(TOOLS)/.installed
	$(VENV)/bin/cfn-lint template.yaml
	$(TOOLS)/bin/sam validate --lint --region $(AWS_DEFAULT_REGION)

bench: $(VENV)/.installed  ## AWS calls per route and latency over the local stack
	$(PY) -m memory_hub_local.bench

$(TOOLS)/.installed:
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install -q aws-sam-cli==1.170.0
	touch $@

build: $(TOOLS)/.installed  ## sam build without Docker (makefile build method, cross-platform wheels)
	$(TOOLS)/bin/sam build

deploy: build
	$(TOOLS)/bin/sam deploy --guided

clean:
	rm -rf $(VENV) $(TOOLS) .aws-sam
