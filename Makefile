# c2 developer entry points. `make serve` runs the server, `make test` runs every check.
# Both create .venv (python3.11) and install the project on first use, at the exact versions
# of constraints.txt; the install re-runs only when pyproject.toml or constraints.txt changes
# (the stamp file below). `make test` also installs the real agents the tests drive
# (package.json / package-lock.json → node_modules), again only when the lock file changes.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
NPM_STAMP := node_modules/.installed-stamp

.PHONY: install agents serve test lint typecheck openapi bench web browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Claude Code (claude-code-acp) and OpenCode at the versions the lock file pins.
$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $(NPM_STAMP)

agents: $(NPM_STAMP)

# The repository's own modules compiled ahead: an editable install has no bytecode for them,
# and where PYTHONDONTWRITEBYTECODE is set (CI images, containers) every start compiled them
# again, about a tenth of `c2 serve`'s time to ready (bench.startup). Quick once up to date.
BYTECODE := $(BIN)/python -m compileall -q c2 core api tests >/dev/null

serve: $(STAMP) web
	$(BYTECODE)
	$(BIN)/c2 serve --home $${C2_HOME:-.c2-dev}

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy -p c2 -p tests -p bench

# Most tests wait on subprocesses and sockets, so more workers than cores pay off; the tests
# marked serial run afterwards, alone (docs/decisions.md, "Test run time").
TEST_WORKERS ?= 3

# Compiled once up front: the tests start hundreds of c2 servers and agents, and with
# PYTHONDONTWRITEBYTECODE set (as on CI) each of them would compile c2's sources again.
test: lint typecheck $(NPM_STAMP) web browser
	$(BYTECODE)
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not serial"
	$(BIN)/pytest -q -m serial

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

# Every bench, each printing its targets beside its figures (README "Benchmarks"). The
# cluster's needs PostgreSQL: it runs when C2_TEST_DATABASE_URL names one.
bench: $(STAMP) $(NPM_STAMP) web browser
	$(BYTECODE)
	$(BIN)/python -m bench.events
	$(BIN)/python -m bench.turns
	$(BIN)/python -m bench.transcript
	$(BIN)/python -m bench.pages
	$(BIN)/python -m bench.agent_latency
	$(BIN)/python -m bench.fleet
	$(BIN)/python -m bench.writer
	$(BIN)/python -m bench.startup
	$(BIN)/python -m bench.spawns
	$(BIN)/python -m bench.checkpoints
	$(BIN)/python -m bench.search
	$(BIN)/python -m bench.web
	@if [ -n "$$C2_TEST_DATABASE_URL" ]; then $(BIN)/python -m bench.cluster; \
	else echo "bench.cluster skipped: it needs PostgreSQL in C2_TEST_DATABASE_URL"; fi

# The web client (web/, TypeScript + Vite) built into the package at api/web_dist, which c2
# serves at `/`. Rebuilt only when its sources, its lock, the OpenAPI document or the typed
# event stream change; `make serve` and `make test` build it when missing or stale.
WEB_STAMP := web/node_modules/.deps-stamp
WEB_INDEX := api/web_dist/index.html
WEB_SOURCES := $(shell find web/src web/index.html web/vite.config.ts web/tsconfig.json web/scripts web/public \
	-type f -not -path 'web/src/c2/*' 2>/dev/null)

$(WEB_STAMP): web/package-lock.json
	cd web && npm ci --no-audit --no-fund --loglevel=error
	touch $(WEB_STAMP)

$(WEB_INDEX): $(WEB_STAMP) $(WEB_SOURCES) openapi/openapi.json $(TS_CLIENT)/src/events.ts
	cd web && npm run --silent build
	touch $(WEB_INDEX)

web: $(WEB_INDEX)

# tests/web drive Debian's Chromium through Playwright (no downloaded browser).
browser:
	@command -v chromium >/dev/null || (apt-get update -q && apt-get install -y -q chromium)
