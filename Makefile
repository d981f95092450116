# Two entry points (see README): `make demo` and `make test`. Both create .venv if missing.
# Every step says what it does; pip's full output goes to .venv/install.log.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_DB := $(CURDIR)/.demo/mem.db
# pip's milestones only (what is being fetched, built, installed); the rest is in the log.
PIP_STEPS := { grep --line-buffered -E '^ *(Collecting|Building wheel for|Installing collected|Successfully installed|ERROR)' | sed -u 's/^/    /' >&2 || true; }

.PHONY: demo test install install-test bytecode lint docs bench clean

$(BIN)/python:
	@echo "==> creating the virtualenv $(VENV)" >&2
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install --quiet --upgrade pip

install: $(BIN)/python
	@echo "==> installing mem into $(VENV) (the first time pip compiles llama-cpp-python: ~10 min on 2 cores, then its wheel is cached); log: $(VENV)/install.log" >&2
	@set -o pipefail; $(BIN)/pip install --progress-bar off -e . 2>&1 | tee $(VENV)/install.log | $(PIP_STEPS)
	@$(MAKE) --no-print-directory bytecode

install-test: $(BIN)/python
	@echo "==> installing mem with test dependencies into $(VENV) (the first time pip compiles llama-cpp-python: ~10 min on 2 cores); log: $(VENV)/install.log" >&2
	@set -o pipefail; $(BIN)/pip install --progress-bar off -e '.[test]' 2>&1 | tee $(VENV)/install.log | $(PIP_STEPS)
	@$(MAKE) --no-print-directory bytecode

# An editable install leaves mem's own modules uncompiled, and where PYTHONDONTWRITEBYTECODE
# is set no process ever writes them: every `mem` then compiled them again (~0.1 s of a 0.3 s
# recall). compileall writes them whatever that variable says.
bytecode: $(BIN)/python
	@echo "==> byte-compiling memcli" >&2
	@$(BIN)/python -m compileall -q memcli > /dev/null

demo: install
	@echo "==> retaining the built-in sample (Maya's notes) into .demo/mem.db; the first run converts the embedder once" >&2
	@rm -rf .demo && mkdir -p .demo
	@$(BIN)/mem --db $(DEMO_DB) retain --jsonl memcli/data/sample.jsonl
	@echo "==> checking the store" >&2
	@$(BIN)/mem --db $(DEMO_DB) doctor > /dev/null
	@echo
	@echo '$$ mem recall "What did Maya decide about the Lisbon trip last spring?" --now 2026-11-20 --limit 5 --trace'
	@$(BIN)/mem --db $(DEMO_DB) recall "What did Maya decide about the Lisbon trip last spring?" \
		--now 2026-11-20 --limit 5 --trace
	@echo
	@echo "==> mem is $(CURDIR)/$(BIN)/mem. To type plain 'mem': ln -s $(CURDIR)/$(BIN)/mem ~/.local/bin/mem (or pipx, see README)" >&2

test: install-test
	@echo "==> ruff, then the whole test suite" >&2
	$(BIN)/ruff check memcli tests bench scripts
	$(BIN)/ruff format --check memcli tests bench scripts
	$(BIN)/python -m pytest -q

# Completions and the man page from the CLI itself (tests/test_docs.py fails when stale).
docs:
	$(BIN)/python scripts/gen_docs.py

bench: install
	$(BIN)/python bench/speed.py

clean:
	rm -rf .demo build *.egg-info
