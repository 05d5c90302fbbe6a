"""The offline API reference at /docs: served by c2, no CDN, no credentials, no data."""

from __future__ import annotations

import re

import httpx

from tests.api.conftest import AppClient


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
