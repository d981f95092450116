# Two entry points (see README): `make demo` and `make test`. Both create .venv if missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_DB := $(CURDIR)/.demo/mem.db

.PHONY: demo test install install-test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

install: $(BIN)/python
	@echo "installing mem into $(VENV) (the first time compiles llama-cpp-python, ~10 min)" >&2
	$(BIN)/pip install --quiet -e .

install-test: $(BIN)/python
	@echo "installing mem with test dependencies (the first time compiles llama-cpp-python, ~10 min)" >&2
	$(BIN)/pip install --quiet -e '.[test]'

demo: install
	rm -rf .demo && mkdir -p .demo
	$(BIN)/mem --db $(DEMO_DB) retain --jsonl memcli/data/sample.jsonl
	@echo
	@echo '$$ mem recall "What did Maya decide about the Lisbon trip last spring?" --now 2026-11-20 --trace'
	@$(BIN)/mem --db $(DEMO_DB) recall "What did Maya decide about the Lisbon trip last spring?" \
		--now 2026-11-20 --limit 5 --trace

test: install-test
	$(BIN)/ruff check memcli tests bench
	$(BIN)/ruff format --check memcli tests bench
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python bench/speed.py

clean:
	rm -rf .demo build *.egg-info
