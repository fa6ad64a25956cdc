# The two set-up commands are `make up` (start the whole stack) and `make test`.
# Each creates .venv and installs what it needs when missing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)
BUF := node_modules/.bin/buf

.PHONY: up test lint gen check-gen bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -qq --upgrade pip
	# compat mode puts the checkout itself on the path, so new packages need no reinstall.
	$(BIN)/pip install -qq -e '.[dev]' --config-settings editable_mode=compat
	@rm -f $(VENV)/.installed-*; touch $@

$(BUF): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

up: $(STAMP)
	$(BIN)/trainyard up

test: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

lint: $(STAMP) $(BUF)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy services infra gateway executor trainyard
	$(BUF) lint
	@if git rev-parse --verify -q main >/dev/null && git cat-file -e main:buf.yaml 2>/dev/null; then \
	  $(BUF) breaking --against '.git#branch=main'; fi

gen: $(STAMP)
	PYTHON=$(BIN)/python infra/gen-protos.sh

check-gen: $(STAMP)
	PYTHON=$(BIN)/python infra/gen-protos.sh --check

bench: $(STAMP)
	$(BIN)/python bench/unary.py
	$(BIN)/python bench/artifacts.py
	$(BIN)/python bench/claims.py
	$(BIN)/python bench/training.py

clean:
	rm -rf $(VENV) node_modules .trainyard .pytest_cache .mypy_cache .ruff_cache
