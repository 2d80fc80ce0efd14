"""OAuth 2.1 client credentials for an upstream: this deployment is the client, the upstream's authorization
server issues the token, and the token is cached per process until shortly before it expires.

The token endpoint is fetched like the upstream itself: through the SSRF guard, pinned, bounded. What it answers is
untrusted: only a bearer token of sane length is taken, and an error is reported by its RFC 6749 code alone. The
caller's own token is never involved: each upstream sees this deployment's client, with the scopes and the
resource (RFC 8707) the admin set.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field

import anyio
import httpx2

from mcp_expose.core.errors import McpExposeError
from mcp_expose.upstream.transport import BoundedTransport, UpstreamRefused

MAX_TOKEN_ANSWER = 64 * 1024
MAX_TOKEN_LENGTH = 8192
# Renew this many seconds before the token says it expires; a token without expires_in is kept this long.
EARLY_RENEWAL = 30.0
DEFAULT_LIFETIME = 300.0
ERROR_CODE = re.compile(r"[a-z_]{1,64}")


class TokenUnavailable(McpExposeError):
    """No token could be had; the message says why without quoting the authorization server."""


@dataclass(frozen=True, slots=True)
class ClientCredentials:
    token_url: str
    client_id: str
    client_secret: str = field(repr=False)
    scopes: str = ""
    resource: str = ""


@dataclass(slots=True)
class _Cached:
    token: str = field(repr=False)
    renew_at: float


class TokenCache:
    """Tokens per upstream server and credentials, in this process. Concurrent callers share one request."""

    def __init__(self) -> None:
        self._tokens: dict[tuple[int, ClientCredentials], _Cached] = {}
        self._locks: dict[tuple[int, ClientCredentials], anyio.Lock] = {}

    async def token(self, server: int, credentials: ClientCredentials, *, timeout: float) -> str:
        key = (server, credentials)
        cached = self._tokens.get(key)
        if cached is not None and time.monotonic() < cached.renew_at:
            return cached.token
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            cached = self._tokens.get(key)
            if cached is not None and time.monotonic() < cached.renew_at:
                return cached.token
            with anyio.fail_after(timeout):  # the whole exchange, however slowly it trickles in
                try:
                    token, lifetime = await fetch_token(credentials, timeout=timeout)
                except TimeoutError:
                    raise TokenUnavailable(f"The token endpoint did not answer within {timeout:g} seconds.") from None
            self._tokens[key] = _Cached(token, time.monotonic() + max(lifetime - EARLY_RENEWAL, 1.0))
            return token

    def forget(self, server: int) -> None:
        """Drop the server's tokens (the upstream refused one): the next call asks for a new one."""
        for key in [key for key in self._tokens if key[0] == server]:
            del self._tokens[key]


async def fetch_token(credentials: ClientCredentials, *, timeout: float) -> tuple[str, float]:
    """A token and its lifetime in seconds, from the token endpoint (client_secret_basic)."""
    form = {"grant_type": "client_credentials"}
    if credentials.scopes:
        form["scope"] = credentials.scopes
    if credentials.resource:
        form["resource"] = credentials.resource
    transport = BoundedTransport("token endpoint", max_bytes=MAX_TOKEN_ANSWER)
    try:
        async with httpx2.AsyncClient(transport=transport, timeout=timeout, follow_redirects=False) as http:
            response = await http.post(
                credentials.token_url,
                data=form,
                auth=(credentials.client_id, credentials.client_secret),
                headers={"Accept": "application/json"},
            )
            body = await response.aread()
    except UpstreamRefused as exc:
        raise TokenUnavailable(f"The token endpoint is refused: {exc}") from None
    except httpx2.HTTPError as exc:
        raise TokenUnavailable(f"The token endpoint cannot be reached ({type(exc).__name__}).") from None
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        answer = None
    if response.status_code != 200 or not isinstance(answer, dict):
        code = answer.get("error") if isinstance(answer, dict) else None
        said = f" ({code})" if isinstance(code, str) and ERROR_CODE.fullmatch(code) else ""
        raise TokenUnavailable(f"The token endpoint answered HTTP {response.status_code}{said}; no token.")
    token = answer.get("access_token")
    if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_LENGTH or not token.isascii():
        raise TokenUnavailable("The token endpoint's answer holds no usable access token.")
    if not token.isprintable() or " " in token:
        raise TokenUnavailable("The token endpoint's answer holds no usable access token.")
    if str(answer.get("token_type", "")).lower() != "bearer":
        raise TokenUnavailable("The token endpoint issued a token that is not a bearer token.")
    lifetime = answer.get("expires_in")
    seconds = (
        float(lifetime) if isinstance(lifetime, int | float) and not isinstance(lifetime, bool) else DEFAULT_LIFETIME
    )
    return token, min(max(seconds, 1.0), 86400.0)


tokens = TokenCache()
