# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test install install-full install-dev lint typecheck bench bench-cli bench-http clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install -q -e .

# The embedded defaults a user wants on one machine: hybrid search (embed) and every sandbox runtime.
install-full: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[embed,sandbox]'

install-dev: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'

# Install into .venv with hybrid search and every runtime, and serve MCP on http://127.0.0.1:7777/mcp.
run: install-full
	$(BIN)/awb start --transport http

lint: install-dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: install-dev
	$(BIN)/mypy

# Install the test dependencies, lint, type-check and run the whole suite.
test: install-dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest

bench: install-dev
	$(BIN)/python benchmarks/ops.py

bench-cli: install-dev
	$(BIN)/python benchmarks/cli_startup.py

bench-http: install-dev
	$(BIN)/python benchmarks/http_load.py

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
