"""The API reference at `/docs`: Swagger UI served by c2 itself, offline, without credentials.

The assets come from the fastapi-offline package (a maintained bundle of Swagger UI), mounted
at `/docs/assets`; nothing is fetched from a CDN. The page reads `/openapi.json` (public: it
describes the API, holds no data) and has "Try it out" switched off, so it shows no data.

`/openapi.json` is served here rather than by FastAPI: its first build (~0.45 s of CPU,
api/openapi.py) runs on a worker thread, where FastAPI's route built it on the event loop and
held every stream and request that long; and the ~350 kB are encoded once, not per request,
with orjson (~1 ms): the standard encoder's C code holds the GIL for its ~10 ms, and the loop
waited that long.
"""

from __future__ import annotations

import asyncio
from importlib.resources import files
from pathlib import Path

import orjson
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

router = APIRouter(include_in_schema=False)
ASSETS = Path(str(files("fastapi_offline") / "static"))
# Scripts and styles from this origin only; Swagger UI sets inline style attributes.
DOCS_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>c2 API reference</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<link rel="icon" href="/docs/assets/favicon.png"></head>
<body><div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script></body></html>
"""
INIT = """SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  supportedSubmitMethods: [],
  presets: [SwaggerUIBundle.presets.apis],
});
"""


OPENAPI_PATH = "/openapi.json"


@router.get(OPENAPI_PATH)  # HEAD too, as every GET (api/head.py)
async def openapi_document(request: Request) -> Response:
    state = request.app.state
    body: bytes | None = getattr(state, "openapi_body", None)
    if body is None:
        body = state.openapi_body = await asyncio.to_thread(_encoded, request.app)
    return Response(body, media_type=JSONResponse.media_type)


def _encoded(app: FastAPI) -> bytes:
    return orjson.dumps(app.openapi())


@router.get("/docs")
async def docs_page() -> HTMLResponse:
    return HTMLResponse(PAGE, headers={"Content-Security-Policy": DOCS_CSP})


@router.get("/docs/init.js")
async def docs_init() -> Response:
    return Response(INIT, media_type="text/javascript")


def install_docs(app: FastAPI) -> None:
    app.include_router(router)
    app.mount("/docs/assets", StaticFiles(directory=ASSETS), name="docs-assets")
