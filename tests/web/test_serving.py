"""How c2 serves the web client: CSP and security headers on the HTML, `no-cache` for the
page, a year's immutable cache for hashed assets, and no credential in any of it."""

from __future__ import annotations

import re

import httpx

from tests.e2e.harness import C2Process


def test_index_and_pairing_page_carry_a_strict_policy(c2: C2Process):
    with httpx.Client(base_url=c2.base_url) as client:
        for path in ("/", "/pair"):
            page = client.get(path)
            assert page.status_code == 200
            assert page.headers["content-type"].startswith("text/html")
            assert page.headers["cache-control"] == "no-cache"
            csp = page.headers["content-security-policy"]
            assert "default-src 'none'" in csp and "script-src 'self'" in csp
            assert "frame-ancestors 'none'" in csp
            assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
            assert page.headers["x-content-type-options"] == "nosniff"
            assert page.headers["referrer-policy"] == "no-referrer"
            # No inline script or style: every script is a same-origin file.
            assert re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page.text) is None
            assert "<style" not in page.text and "bearer" not in page.text.lower()


def test_hashed_assets_are_immutable_and_unknown_ones_404(c2: C2Process):
    with httpx.Client(base_url=c2.base_url) as client:
        index = client.get("/").text
        assets = re.findall(r'(?:src|href)="(/assets/[^"]+)"', index)
        assert any(a.endswith(".js") for a in assets) and any(a.endswith(".css") for a in assets)
        for path in assets:
            resp = client.get(path)
            assert resp.status_code == 200
            assert resp.headers["cache-control"] == "public, max-age=31536000, immutable"
            assert resp.headers["x-content-type-options"] == "nosniff"
        assert client.get("/assets/nope.js").status_code == 404
        assert client.get("/assets/..%2fweb_dist%2findex.html").status_code == 404
