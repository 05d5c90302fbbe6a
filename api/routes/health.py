"""Liveness and readiness probes (API.md §0) and the browser pairing page; no auth."""

from __future__ import annotations

import base64
import hashlib

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from api.authn import ServicesDep
from api.errors import NotReadyError
from api.schemas import Health

router = APIRouter(tags=["health"])

# Reads the token from the URL fragment (never sent to a server), redeems it, shows the bearer.
PAIR_PAGE = """<!doctype html>
<meta charset="utf-8"><title>Pair with c2</title>
<meta name="referrer" content="no-referrer">
<h1>Pair this device with c2</h1>
<p><label>Device name <input id="name" value="browser"></label>
<button id="pair">Pair</button></p>
<pre id="out"></pre>
<script>
const token = new URLSearchParams(location.hash.slice(1)).get("token");
history.replaceState(null, "", location.pathname);
document.getElementById("pair").onclick = async () => {
  const res = await fetch("/v1/pair", {method: "POST",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify({token, device_name: document.getElementById("name").value})});
  document.getElementById("out").textContent = JSON.stringify(await res.json(), null, 2);
};
</script>
"""


_PAIR_SCRIPT = PAIR_PAGE.split("<script>", 1)[1].split("</script>", 1)[0]
_PAIR_SCRIPT_HASH = base64.b64encode(hashlib.sha256(_PAIR_SCRIPT.encode()).digest()).decode()
# Only the page's own script may run (by hash, no 'unsafe-inline'); it talks to this origin.
PAIR_PAGE_CSP = (
    "default-src 'none'; "
    f"script-src 'sha256-{_PAIR_SCRIPT_HASH}'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """The process is up."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health)
async def readyz(services: ServicesDep) -> Health:
    """Migrations ran, the store answers and the server is not shutting down."""
    if not await services.is_ready():
        raise NotReadyError("the server is starting, shutting down, or its store is unavailable")
    return Health(status="ready")


@router.get("/pair", include_in_schema=False)
async def pair_page() -> HTMLResponse:
    return HTMLResponse(
        PAIR_PAGE, headers={"Cache-Control": "no-store", "Content-Security-Policy": PAIR_PAGE_CSP}
    )
