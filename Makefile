# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test install install-full install-dev install-test lint typecheck bench bench-cli bench-http bench-call clean chromium screenshot

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

# The test dependencies plus the MCP client frameworks of tests/clients (LangChain's adapters, which pin
# another MCP SDK major, get a venv of their own under .venv-clients/, built by their test).
install-test: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev,clients]'

# Install into .venv with hybrid search and every runtime, and serve MCP on http://127.0.0.1:7777/mcp.
run: install-full
	$(BIN)/awb start --transport http

lint: install-dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: install-dev
	$(BIN)/mypy

# Debian's Chromium for the web panel's browser tests (Playwright drives it; it never downloads a
# browser of its own). A no-op where /usr/bin/chromium exists; installing needs root (CI runs as root).
CHROMIUM := /usr/bin/chromium
chromium:
	@test -x $(CHROMIUM) || { \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends chromium; }

# The README's picture of the web panel, taken by the browser test that builds it.
screenshot: install-dev chromium
	$(BIN)/python -m pytest -q tests/web/test_browser.py -k readme_screenshot
	mkdir -p docs/images
	cp build/screenshots/readme.png docs/images/web-panel.png

# Install the test dependencies, lint, type-check and run the whole suite on two workers (pytest-xdist;
# tests marked xdist_group stay together on one worker). `make test PYTEST_WORKERS=0` runs it in one process.
PYTEST_WORKERS ?= 2
test: install-test chromium
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup

bench: install-dev
	$(BIN)/python benchmarks/ops.py

bench-cli: install-dev
	$(BIN)/python benchmarks/cli_startup.py

bench-http: install-dev
	$(BIN)/python benchmarks/http_load.py

bench-call: install-dev
	$(BIN)/python benchmarks/call_path.py

clean:
	rm -rf $(VENV) .venv-clients build dist .pytest_cache .mypy_cache .ruff_cache
