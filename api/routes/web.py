"""The web client at `/` (issue 12): the Vite build of `web/`, shipped inside the package.

`make web` builds `web/` into `api/web_dist/` (package data, so a non-editable install serves
it too). `index.html` is served at `/` and at `/pair` (the pairing URL `c2 serve` prints: the
app redeems the `#token=` fragment itself) with `no-cache`, so a rebuilt client is picked up at
once; the content-hashed files under `/assets/` are immutable and cached for a year. The CSP
allows this origin's scripts, styles and API only: no inline script or style, no eval, no
framing. Without a build, `/` says how to make one instead of answering 404.

`/sw.js` is the service worker that shows Web Push notifications (issue 15). It is served
from the root, uncached and unhashed, because a worker's scope is its own path's folder and
the browser re-checks the script at that one URL for updates; it fetches nothing, so its own
policy allows nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse, Response

router = APIRouter(include_in_schema=False)

DIST = Path(__file__).resolve().parent.parent / "web_dist"
ASSET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
WEB_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": WEB_CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
ASSET_HEADERS = {
    "Cache-Control": "public, max-age=31536000, immutable",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
WORKER_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
NOT_BUILT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>c2</title></head>
<body><h1>c2 is running</h1>
<p>The web client is not built into this installation. In a source checkout run
<code>make web</code> (or <code>make serve</code>, which builds it), then reload.
The API is at <a href="/docs">/docs</a>.</p></body></html>
"""


def _index() -> Response:
    index = DIST / "index.html"
    try:
        page = index.read_text(encoding="utf-8")
    except OSError:
        return HTMLResponse(NOT_BUILT, headers=PAGE_HEADERS)
    return HTMLResponse(page, headers=PAGE_HEADERS)


@router.get("/")
async def web_index() -> Response:
    return _index()


@router.get("/pair")
async def web_pair() -> Response:
    return _index()


@router.get("/assets/{name}")
async def web_asset(name: str) -> Response:
    path = DIST / "assets" / name
    if not ASSET_NAME.match(name) or not path.is_file():
        return Response(status_code=404, headers={"Cache-Control": "no-store"})
    return FileResponse(path, headers=ASSET_HEADERS)


@router.get("/sw.js")
async def web_service_worker() -> Response:
    path = DIST / "sw.js"
    if not path.is_file():
        return Response(status_code=404, headers={"Cache-Control": "no-store"})
    return FileResponse(path, media_type="text/javascript", headers=WORKER_HEADERS)
