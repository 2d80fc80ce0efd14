"""What the edge answers itself, before any MCP handling, and how it reads a request: the OAuth-style JSON errors,
the 401 and 403 challenges, the WSGI entry's refusal of streams, and the bounded body read that the fast path and
step-up both need (replayed to whoever reads it next)."""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope

from mcp_expose.access.failures import AuthFailure
from mcp_expose.access.protected_resource import bearer_challenge
from mcp_expose.core.conf import get_settings

WHITESPACE = (b" ", b"\t")


def json_error(status: int, error: str, description: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": description}, status_code=status, headers=headers)


def too_large() -> JSONResponse:
    return json_error(413, "request_too_large", "The request body is too large.")


def challenge(failure: AuthFailure, resource: str) -> JSONResponse:
    """401 telling the client where our metadata is and which scope to ask for (error= only if a token came)."""
    base_scope = get_settings().BASE_SCOPE
    header = bearer_challenge(
        resource=resource,
        scopes=[base_scope] if base_scope else [],
        error=failure.error,
        description=failure.description if failure.error else None,
    )
    return json_error(
        failure.status, failure.error or "unauthorized", failure.description, {"WWW-Authenticate": header}
    )


def insufficient_scope(scopes: frozenset[str], resource: str) -> JSONResponse:
    description = "This request needs the scopes: " + " ".join(sorted(scopes)) + "."
    header = bearer_challenge(resource=resource, scopes=scopes, error="insufficient_scope", description=description)
    return json_error(403, "insufficient_scope", description, {"WWW-Authenticate": header})


def needs_streams(method: str) -> JSONResponse:
    """What the WSGI entry answers a stream's request (GET opens one, DELETE ends a session): 405, saying why."""
    return json_error(
        405,
        "streams_unavailable",
        f"{method} needs a streaming connection (a standing SSE stream or a 2025-11-25 session), which this "
        "server's WSGI entry cannot hold. Serve the MCP endpoint with mcp_expose.asgi.get_asgi_application() "
        "under an ASGI server (uvicorn, daphne, hypercorn) for streams; POST requests are served here.",
        {"Allow": "POST"},
    )


def without_outer_whitespace(scope: Scope) -> Scope:
    """Header values without the optional whitespace around them (RFC 9110 5.5), which some servers'
    parsers keep: `Mcp-Name:  x ` names the tool `x`, for us and for the SDK's header checks."""
    raw = scope.get("headers", [])
    if not any(value[:1] in WHITESPACE or value[-1:] in WHITESPACE for _, value in raw):
        return scope
    return {**scope, "headers": [(name, value.strip(b" \t")) for name, value in raw]}


def headers_of(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name; repeated headers are joined as HTTP allows."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", []):
        name, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None once it exceeds `limit` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that yields the already-read body once, then defers to the real one (disconnects)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
