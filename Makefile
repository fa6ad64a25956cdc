# The two set-up commands are `make up` (start the whole stack) and `make test`.
# Each creates .venv and installs what it needs when missing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# TORCH=cpu installs torch's CPU build from the PyTorch CPU wheel index (PyPI's build for
# x86 Linux bundles CUDA, gigabytes a machine without an NVIDIA GPU never uses). Its
# `+cpu` build replaces a CUDA build already installed; the install that follows keeps it.
TORCH ?=
TORCH_PIN := $(shell grep -o '"torch==[^"]*"' pyproject.toml | tr -d '"')
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)$(if $(TORCH),-torch-$(TORCH))
# npm installs buf (proto lint) and uPlot, the console's chart, which Envoy serves.
NODE := node_modules/.installed

.PHONY: up test lint gen check-gen bench clean

$(STAMP): pyproject.toml
	@echo "make: installing Trainyard's Python packages into $(VENV) (the first time takes a few minutes; torch is the largest)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -qq --upgrade pip
ifeq ($(TORCH),cpu)
	@echo "make: installing $(TORCH_PIN)'s CPU build from $(TORCH_CPU_INDEX)"
	$(BIN)/pip install -qq '$(TORCH_PIN)+cpu' --index-url $(TORCH_CPU_INDEX)
else ifneq ($(TORCH),)
	$(error TORCH may be cpu, or unset for PyPI's build)
endif
	# compat mode puts the checkout itself on the path, so new packages need no reinstall.
	$(BIN)/pip install -qq -e '.[server,executor,dev]' --config-settings editable_mode=compat
	@rm -f $(VENV)/.installed-*; touch $@
	@echo "make: Python packages installed"

$(NODE): package.json package-lock.json
	@echo "make: installing buf and the console's chart with npm"
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The console's browser tests drive Debian's chromium.
CHROMIUM := /usr/bin/chromium
WRK := /usr/bin/wrk
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

# promtool (Debian's prometheus package; its server is not started) checks the alerts.
PROMTOOL := /usr/bin/promtool

$(PROMTOOL):
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus

$(CHROMIUM):
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium

# wrk loads the gateway natively in bench/scale.py, so the figure is Envoy's, not Python's.
$(WRK):
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk

# TLS=self-signed serves the gateway over TLS from a pair made in the home; TLS_CERT and
# TLS_KEY name the operator's own (TLS_CA the CAs clients verify it with, TLS_CLIENT_CA the
# ones whose client certificates executors must show). Plain HTTP without them.
TLS ?=
TLS_ENV := $(if $(filter self-signed,$(TLS)),TRAINYARD_TLS_SELF_SIGNED=1) \
  $(if $(TLS_CERT),TRAINYARD_TLS_CERT=$(TLS_CERT) TRAINYARD_TLS_KEY=$(TLS_KEY)) \
  $(if $(TLS_CA),TRAINYARD_TLS_CA=$(TLS_CA)) $(if $(TLS_CLIENT_CA),TRAINYARD_TLS_CLIENT_CA=$(TLS_CLIENT_CA))

up: $(STAMP) $(NODE)
ifneq ($(filter-out self-signed,$(TLS)),)
	$(error TLS may be self-signed, or unset; TLS_CERT and TLS_KEY name a pair of your own)
endif
	@echo "make: starting the stack (trainyard up); Ctrl-C stops it"
	$(TLS_ENV) $(BIN)/trainyard up

# Unit and integration modules run on TEST_WORKERS workers (pytest-xdist), a module on one
# of them, each worker on its own ports and homes. The end-to-end tests run one at a time:
# their stacks train on the same two cores, and several check what a lease's timing does.
TEST_WORKERS ?= 2

test: $(STAMP) $(NODE) $(CHROMIUM)
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS) tests/unit tests/integration
	$(BIN)/pytest $(PYTEST_ARGS) tests/e2e

lint: $(STAMP) $(NODE) $(PROMTOOL)
	node --check gateway/console/app.js
	$(PROMTOOL) check rules infra/prometheus/alerts.yml
	cd infra/prometheus && $(PROMTOOL) test rules alerts_test.yml
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

# Each script prints its figures beside their baselines and adds them to one table
# (bench/figures.py), printed at the end, after a script that failed too; the target then
# fails. PostgreSQL is measured too when TRAINYARD_TEST_DATABASE_URL names one.
BENCHES := unary auth artifacts claims training projection clients tinker_sdk scale

bench: $(STAMP) $(WRK)
	@table=$$(mktemp); failed=; \
	for name in $(BENCHES); do \
	  echo "make: bench/$$name.py"; \
	  TRAINYARD_BENCH_TABLE=$$table $(BIN)/python bench/$$name.py || failed="$$failed $$name"; \
	done; \
	$(BIN)/python -m bench.figures $$table; rm -f $$table; \
	if [ -n "$$failed" ]; then echo "make: failed:$$failed"; exit 1; fi

clean:
	rm -rf $(VENV) node_modules .trainyard .pytest_cache .mypy_cache .ruff_cache
