# c2 in a container: `docker build -t c2 . && docker run -p 127.0.0.1:4599:4599 -v c2:/data c2`
# Runs as an unprivileged user; state (SQLite, providers.toml, skills/) lives in /data.
# The web client is built with node in a stage of its own; only its output ships.
FROM node:20-slim AS web
WORKDIR /src
COPY openapi ./openapi
COPY clients/typescript/src/events.ts ./clients/typescript/src/events.ts
COPY web/package.json web/package-lock.json ./web/
RUN cd web && npm ci --no-audit --no-fund
COPY web ./web
RUN cd web && npm run build

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    C2_HOME=/data

RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 c2 \
    && install -d -o c2 -g c2 -m 0700 /data

WORKDIR /app
COPY pyproject.toml README.md ./
COPY api ./api
COPY core ./core
COPY --from=web /src/api/web_dist ./api/web_dist
RUN pip install .

USER c2
VOLUME ["/data"]
EXPOSE 4599
HEALTHCHECK --interval=30s --timeout=3s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:4599/healthz', timeout=2)"

# Binding every interface is needed inside a container; the Host allowlist still answers only
# loopback names unless more are given, e.g. `docker run … c2 serve --host 0.0.0.0 --allow-host c2.lan`.
ENTRYPOINT ["c2"]
CMD ["serve", "--host", "0.0.0.0"]
