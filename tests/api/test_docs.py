"""The offline API reference at /docs: served by c2, no CDN, no credentials, no data."""

from __future__ import annotations

import json
import re

import httpx
from starlette.requests import Request

from c2.api.routes.docs import openapi_document
from tests.api.conftest import AppClient
from tests.loop_turns import turns_during


async def test_docs_page_is_offline_and_public(app_client: AppClient):
    """/docs, its assets and /openapi.json answer without a bearer; every asset is local."""
    async with httpx.AsyncClient(
        transport=app_client.transport, base_url="http://localhost"
    ) as anonymous:
        page = await anonymous.get("/docs")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        urls = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert urls and all(u.startswith("/docs/") for u in urls), urls
        for url in urls:
            asset = await anonymous.get(url)
            assert asset.status_code == 200, url
            assert asset.content
        init = (await anonymous.get("/docs/init.js")).text
        assert '"/openapi.json"' in init and "supportedSubmitMethods: []" in init
        doc = await anonymous.get("/openapi.json")
        assert doc.status_code == 200 and doc.json()["info"]["title"] == "c2"
        assert (await anonymous.get("/v1/sessions")).status_code == 401


async def test_openapi_document_is_built_while_the_loop_runs_and_encoded_once(
    app_client: AppClient,
):
    """/openapi.json's first build (~0.45 s of CPU) runs on a worker thread: other tasks on the
    loop go on meanwhile (built on the loop, as FastAPI's own route did, none ran: 0 turns). The
    bytes are the document as `app.openapi()` gives it, and later requests get the same bytes."""
    app = app_client.app
    scope = {"type": "http", "app": app, "method": "GET", "path": "/openapi.json", "headers": []}
    first, turns = await turns_during(openapi_document(Request(scope)))
    assert turns > 0, "the loop ran nothing while the document was built"
    assert json.loads(bytes(first.body)) == app.openapi()
    assert (await openapi_document(Request(scope))).body is first.body
    transport = app_client.transport
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        served = await http.get("/openapi.json")
        head = await http.head("/openapi.json")
    assert served.content == first.body
    assert served.headers["content-type"] == "application/json"
    assert head.status_code == 200  # as FastAPI's own route answered it
