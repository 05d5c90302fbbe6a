# c2 developer entry points. `make serve` runs the server, `make test` runs every check.
# Both create .venv (python3.11) and install the project on first use; the install re-runs
# only when pyproject.toml changes (the stamp file below).

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install serve test lint typecheck openapi bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

serve: $(STAMP)
	$(BIN)/c2 serve --home $${C2_HOME:-.c2-dev}

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy core api

test: lint typecheck
	$(BIN)/pytest -q

# The generated-client tests need the TypeScript generator and compiler of clients/typescript,
# installed exactly as locked; re-installed only when the lock changes.
TS_CLIENT := clients/typescript
TS_STAMP := $(TS_CLIENT)/node_modules/.deps-stamp

$(TS_STAMP): $(TS_CLIENT)/package-lock.json
	cd $(TS_CLIENT) && npm ci --no-audit --no-fund --loglevel=error
	touch $(TS_STAMP)

test: $(TS_STAMP)

# Regenerate the committed OpenAPI document after changing routes or schemas.
openapi: $(STAMP)
	$(BIN)/c2 openapi > openapi/openapi.json

bench: $(STAMP)
	$(BIN)/python -m bench.events
	$(BIN)/python -m bench.turns
	$(BIN)/python -m bench.transcript
