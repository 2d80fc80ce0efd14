"""Opaque page cursors: a page's query parameters, signed so they come back exactly as issued."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

from django.core import signing

from mcp_expose.core.errors import InvalidInput

SALT = "mcp_expose.cursor"
# A cursor carries a page's query (each string within its own bound, then escaped, compressed and encoded), so
# it has a bound of its own rather than MAX_STRING_LENGTH; its signature is checked before anything reads it.
CURSOR_MAX_LENGTH = 100_000


def cursor_for_url(url: str | None, scope: str) -> str | None:
    """The cursor that reproduces `url`'s query (the view's own next/previous link)."""
    if not url:
        return None
    return signing.dumps(
        {"s": scope, "q": parse_qsl(urlsplit(url).query, keep_blank_values=True)}, salt=SALT, compress=True
    )


def cursor_for_values(values: dict[str, Any], scope: str) -> str:
    return signing.dumps({"s": scope, "v": values}, salt=SALT, compress=True)


def read_cursor(cursor: str, scope: str) -> Any:
    """What a cursor carries. A forged, altered or foreign cursor is invalid input."""
    try:
        data = signing.loads(cursor, salt=SALT)
    except signing.BadSignature:
        data = None
    if not isinstance(data, dict) or data.get("s") != scope:
        raise InvalidInput(
            "The cursor is not valid for this tool.",
            details=[{"path": "$.cursor", "message": "Pass back a cursor exactly as this tool returned it."}],
        )
    return data.get("q", data.get("v"))
