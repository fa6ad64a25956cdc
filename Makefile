# The two set-up commands are `make up` (start the whole stack) and `make test`.
# Each creates .venv and installs what it needs when missing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)
# npm installs buf (proto lint) and uPlot, the console's chart, which Envoy serves.
NODE := node_modules/.installed

.PHONY: up test lint gen check-gen bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -qq --upgrade pip
	# compat mode puts the checkout itself on the path, so new packages need no reinstall.
	$(BIN)/pip install -qq -e '.[dev]' --config-settings editable_mode=compat
	@rm -f $(VENV)/.installed-*; touch $@

$(NODE): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The console's browser tests drive Debian's chromium.
CHROMIUM := /usr/bin/chromium
WRK := /usr/bin/wrk
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

$(CHROMIUM):
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium

# wrk loads the gateway natively in bench/scale.py, so the figure is Envoy's, not Python's.
$(WRK):
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk

up: $(STAMP) $(NODE)
	$(BIN)/trainyard up

test: $(STAMP) $(NODE) $(CHROMIUM)
	$(BIN)/pytest $(PYTEST_ARGS)

lint: $(STAMP) $(NODE)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy services infra gateway executor trainyard
	node_modules/.bin/buf lint
	@if git rev-parse --verify -q main >/dev/null && git cat-file -e main:buf.yaml 2>/dev/null; then \
	  node_modules/.bin/buf breaking --against '.git#branch=main'; fi

gen: $(STAMP)
	PYTHON=$(BIN)/python infra/gen-protos.sh

check-gen: $(STAMP)
	PYTHON=$(BIN)/python infra/gen-protos.sh --check

bench: $(STAMP) $(WRK)
	$(BIN)/python bench/unary.py
	$(BIN)/python bench/artifacts.py
	$(BIN)/python bench/claims.py
	$(BIN)/python bench/training.py
	$(BIN)/python bench/projection.py
	$(BIN)/python bench/clients.py
	$(BIN)/python bench/scale.py

clean:
	rm -rf $(VENV) node_modules .trainyard .pytest_cache .mypy_cache .ruff_cache
