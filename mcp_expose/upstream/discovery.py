"""Discovery: what an upstream lists now, read through the bounded transport. A value; it changes nothing.

`discover` connects with the official SDK client, reads every page of `tools/list` (at most `MAX_PAGES`), and
returns the tools that passed the bounded reader with the diagnostics of those that did not. An upstream that
cannot be reached, or answers what cannot be read, gives an error and no tools: `record_discovery` then keeps
what was approved as it was.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import ValidationError

from mcp_expose.upstream.client_credentials import ClientCredentials, TokenUnavailable, tokens
from mcp_expose.upstream.headers import header_values, secret_value
from mcp_expose.upstream.quiet_sdk import talking_to
from mcp_expose.upstream.reader import Diagnostic, ToolDefinition, read_tools
from mcp_expose.upstream.sealing import SecretUnavailable, unseal
from mcp_expose.upstream.transport import BoundedTransport, UpstreamRefused

MAX_PAGES = 50
# Largest answer read from an upstream, in bytes.
MAX_ANSWER_BYTES = 4 * 1024 * 1024
MODES = {"auto": "auto", "2026-07-28": "2026-07-28", "2025-11-25": "legacy"}
MAX_ERROR_LENGTH = 500


@dataclass(frozen=True, slots=True)
class UpstreamTarget:
    """What a connection to one upstream needs, read from its row (secrets unsealed)."""

    pk: int
    name: str
    url: str
    protocol: str = "auto"
    connect_timeout: float = 5.0
    call_timeout: float = 30.0
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    oauth: ClientCredentials | None = None

    @classmethod
    def from_row(cls, row: Any) -> UpstreamTarget:
        """Raises `SecretUnavailable` when a sealed secret cannot be opened (its message says which)."""
        headers: dict[str, str] = {}
        oauth = None
        if row.authentication == "headers" and row.sealed_headers:
            what = f"the headers of upstream {row.name!r}"
            headers = header_values(json.loads(unseal(row.sealed_headers, what)), what)
        elif row.authentication == "client_credentials":
            what = f"the client secret of upstream {row.name!r}"
            if not row.sealed_client_secret:
                raise SecretUnavailable(f"{what} is not set.")
            oauth = ClientCredentials(
                token_url=row.oauth_token_url,
                client_id=row.oauth_client_id,
                client_secret=secret_value(unseal(row.sealed_client_secret, what), what),
                scopes=row.oauth_scopes,
                resource=row.oauth_resource or row.url,
            )
        return cls(row.pk, row.name, row.url, row.protocol, row.connect_timeout, row.call_timeout, headers, oauth)

    async def authorization(self) -> dict[str, str]:
        """The Authorization header of a client-credentials upstream (its cached token, or a new one); empty
        for the others. Raises `TokenUnavailable`."""
        if self.oauth is None:
            return {}
        token = await tokens.token(self.pk, self.oauth, timeout=self.connect_timeout + self.call_timeout)
        return {"Authorization": f"Bearer {token}"}

    def http_client(self, transport: httpx2.AsyncBaseTransport, extra: Mapping[str, str]) -> httpx2.AsyncClient:
        timeout = httpx2.Timeout(self.call_timeout, connect=self.connect_timeout)
        return httpx2.AsyncClient(
            transport=transport, headers={**self.headers, **extra}, timeout=timeout, follow_redirects=False
        )


@dataclass(frozen=True, slots=True)
class Discovery:
    tools: tuple[ToolDefinition, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()
    error: str | None = None
    protocol_version: str = ""
    server_info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def reached(self) -> bool:
        return self.error is None


async def discover(target: UpstreamTarget) -> Discovery:
    """Every tool the upstream lists now, read within bounds; never raises for anything the upstream does."""
    transport = BoundedTransport(target.name, max_bytes=MAX_ANSWER_BYTES)
    diagnostics: list[Diagnostic] = []
    budget = target.connect_timeout + target.call_timeout * 2
    protocol_version, server_info = "", {}
    try:
        with talking_to(target.name), anyio.fail_after(budget):
            authorization = await target.authorization()
            async with (
                target.http_client(transport, authorization) as http,
                Client(
                    streamable_http_client(target.url, http_client=http), mode=MODES.get(target.protocol, "auto")
                ) as client,
            ):
                cursor: str | None = None
                asked = 0
                for _ in range(MAX_PAGES):
                    page = await client.list_tools(cursor=cursor, cache_mode="bypass")
                    asked += 1
                    if len(transport.pages) != asked:
                        # The page reached the SDK some other way (a resumed stream, an answer not to our id):
                        # unread by the bounded reader, it is not trusted.
                        return Discovery(
                            error="A tools/list page came back in a form that is not read; nothing is kept."
                        )
                    cursor = page.next_cursor
                    if not cursor:
                        break
                else:
                    diagnostics.append(
                        Diagnostic(None, "tools", f"more than {MAX_PAGES} pages; the first {MAX_PAGES} are read")
                    )
                protocol_version = client.protocol_version
                info = client.server_info
                server_info = _plain_info(info.model_dump(mode="json", exclude_none=True)) if info is not None else {}
    except TimeoutError:
        return Discovery(error=f"The upstream did not answer within {budget:g} seconds.")
    except Exception as exc:  # noqa: BLE001  (whatever an upstream does ends here, as its diagnostic)
        return Discovery(error=describe_failure(exc, target, transport.refusal_status))
    entries = [entry for page in transport.pages for entry in page]
    tools, read_diagnostics = read_tools(entries, target.name)
    return Discovery(
        tuple(tools), (*read_diagnostics, *transport.notes, *diagnostics), None, protocol_version, server_info
    )


def describe_failure(exc: BaseException, target: UpstreamTarget, status: int | None = None) -> str:
    """What went wrong talking to an upstream, in one bounded line: the innermost cause of an exception group,
    its type and message, never a traceback."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, httpx2.ConnectError) and "CERTIFICATE_VERIFY_FAILED" in str(exc):
        text = (
            f"The upstream's TLS certificate was refused ({_tls_reason(exc)}). If a private authority signed it, "
            "name that authority's PEM file in UPSTREAM_CA_BUNDLE."
        )
    elif isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout):
        # The socket's own words ("Connection refused"): nothing of the request is in them.
        text = f"The upstream cannot be reached ({type(exc).__name__}: {exc})."
    elif isinstance(exc, httpx2.RemoteProtocolError | httpx2.ReadError):
        text = f"The upstream closed the connection before its answer was complete ({type(exc).__name__})."
    elif isinstance(exc, httpx2.TimeoutException):
        text = f"The upstream did not answer within {target.call_timeout:g} seconds."
    elif status == 508:
        text = "The upstream is this server itself (it refused our own request as a loop)."
    elif status is not None:
        text = f"The upstream answered HTTP {status}."
    elif isinstance(exc, ValidationError):
        text = f"The upstream's answer does not follow the protocol ({exc.error_count()} problems, first at {_location(exc)})."
    elif isinstance(exc, SecretUnavailable | UpstreamRefused | TokenUnavailable):
        text = str(exc)
    else:
        # Only the type: an HTTP library's message may quote what was sent (a header's value, a secret).
        text = f"The upstream could not be used ({type(exc).__name__})."
    text = " ".join(text.split())
    return text if len(text) <= MAX_ERROR_LENGTH else text[: MAX_ERROR_LENGTH - 1] + "…"


def _tls_reason(exc: BaseException) -> str:
    """OpenSSL's reason, after "certificate verify failed: " (the name mismatch or the unknown issuer)."""
    reason = str(exc).split("certificate verify failed:", 1)[-1]
    return reason.split("(_ssl.c", 1)[0].strip(" ()") or "certificate verify failed"


def _location(exc: ValidationError) -> str:
    errors = exc.errors()
    return ".".join(str(part) for part in errors[0]["loc"])[:100] if errors else "?"


def _plain_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """The upstream's name, title and version as it states them, bounded: shown to the admin, never served."""
    return {key: str(info[key])[:200] for key in ("name", "title", "version") if isinstance(info.get(key), str)}
