# c2 in a container: `docker build -t c2 . && docker run -p 127.0.0.1:4599:4599 -v c2:/data c2`
# Runs as an unprivileged user; all state lives in the /data volume: c2's home (SQLite,
# providers.toml, skills/), the agents' own logins and settings (HOME=/data/user) and the npm
# cache of agents fetched at first use.
# tests/unit/test_container_context.py installs exactly what this file copies (no container
# engine runs in CI): keep every COPY source a path of the repository.

# Node.js for the npm-launched agents (Claude Code, OpenCode, `npx …` providers).
FROM node:22-bookworm-slim AS node

# The web client (web/, built with Vite into api/web_dist) in a stage of its own; only its
# output ships.
FROM node:22-bookworm-slim AS web
WORKDIR /src
COPY openapi ./openapi
COPY clients/typescript/src/events.ts ./clients/typescript/src/events.ts
COPY web/package.json web/package-lock.json ./web/
RUN cd web && npm ci --no-audit --no-fund --loglevel=error
COPY web ./web
RUN cd web && npm run build

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    C2_HOME=/data \
    HOME=/data/user \
    NPM_CONFIG_CACHE=/data/npm-cache \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_PREFIX=/opt/c2-agents \
    PATH=/opt/c2-agents/lib/node_modules/.bin:$PATH

COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/npm
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
    && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
    && apt-get update \
    && apt-get install -y --no-install-recommends git ca-certificates \
    # setpriv gives each agent the parent-death signal (core/agents/stdio.py): util-linux's
    # on bookworm, a package of its own where a release split it out.
    && (command -v setpriv >/dev/null || apt-get install -y --no-install-recommends setpriv) \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 c2 \
    && install -d -o c2 -g c2 -m 0700 /data /data/user /data/npm-cache

# The npm agents, preinstalled exactly as package-lock.json pins them, as the global npm root
# (NPM_CONFIG_PREFIX): `npx -y <package>` runs them without a download and c2 reports them
# available; any other npx provider is fetched at first use into the cache in /data.
COPY package.json package-lock.json /opt/c2-agents/lib/
RUN cd /opt/c2-agents/lib \
    && npm ci --omit=dev --no-audit --no-fund --loglevel=error \
    && rm -rf /data/npm-cache/* /root/.npm

# c2 itself, at the exact versions of constraints.txt.
WORKDIR /app
COPY pyproject.toml README.md constraints.txt ./
COPY c2 ./c2
COPY api ./api
COPY core ./core
COPY --from=web /src/api/web_dist ./api/web_dist
RUN pip install -c constraints.txt .

USER c2
WORKDIR /data
VOLUME ["/data"]
EXPOSE 4599
HEALTHCHECK --interval=30s --timeout=3s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:4599/healthz', timeout=2)"

# Binding every interface is needed inside a container; the Host allowlist still answers only
# loopback names unless more are given, e.g. `docker run … c2 serve --host 0.0.0.0 --allow-host c2.lan`.
ENTRYPOINT ["c2"]
CMD ["serve", "--host", "0.0.0.0"]
