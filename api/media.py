"""Request bodies are JSON: a body sent with another (or no) Content-Type is a 415 problem.

Without this check FastAPI would skip decoding such a body and answer a confusing 422 about
the fields it then cannot see. Requests without a body (e.g. a bare cancel) pass.
"""

from __future__ import annotations

from fastapi import Request

from c2.api.errors import UnsupportedMediaTypeError


def is_json(media_type: str) -> bool:
    """`application/json` or a `+json` structured syntax (e.g. application/merge-patch+json)."""
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


async def json_body(request: Request) -> None:
    """App-wide dependency: refuse a non-empty body that is not declared as JSON. (Async
    though it never awaits: on the loop, not in the thread pool; see api/authn.py.)"""
    headers = request.headers
    if headers.get("content-length", "0") == "0" and "transfer-encoding" not in headers:
        return
    media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if not is_json(media_type):
        got = f"Content-Type {media_type!r}" if media_type else "no Content-Type"
        raise UnsupportedMediaTypeError(
            f"request bodies are JSON: send Content-Type: application/json (got {got})"
        )
