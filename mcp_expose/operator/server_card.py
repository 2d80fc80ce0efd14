"""Our server card, and reading another server's: SEP-2127 ("MCP Server Cards", a draft; read on its branch
`sep/mcp-server-cards` of modelcontextprotocol/modelcontextprotocol, `seps/2127-mcp-server-cards.md`, as of
2026-08-14, with the wire format of modelcontextprotocol/experimental-ext-server-card).

Ours says who we are and where to connect: name, version, a description, and every endpoint as a remote, with the
eras it speaks and whether it needs an `Authorization` header. It lists no tools: what a caller is shown depends
on who calls. The draft recommends `<endpoint URL>/server-card` as the card's address; we also keep the
`/.well-known/mcp/server-card` address of the earlier draft, which costs nothing.

Beyond the draft's fields, which no longer describe capabilities or authentication, the card keeps two of ours,
kept truthful: `capabilities` says lists are announced when they change only where this entry can announce them
(the ASGI entry; the WSGI entry holds no streams), and each remote's `authentication` says `required` only when
anonymous callers are refused. `_meta` points at the OAuth metadata.

Another server's card is untrusted input. It is fetched through the SSRF guard, bounded, and only suggests what
the registration form starts with; a person still saves the form and approves every tool.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2

from mcp_expose import __version__
from mcp_expose.access.protected_resource import authorization_servers, metadata_url, resource_uri
from mcp_expose.core.conf import get_settings
from mcp_expose.core.endpoints import endpoints
from mcp_expose.core.errors import McpExposeError
from mcp_expose.serving.versions import PROTOCOL_VERSIONS
from mcp_expose.upstream.transport import BoundedTransport, UpstreamRefused

SCHEMA = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
MEDIA_TYPE = "application/mcp-server-card+json"
# Appended to an endpoint's path: the address the draft recommends.
CARD_SUFFIX = "/server-card"
CARD_NAME = re.compile(r"[A-Za-z0-9.-]+/[A-Za-z0-9._-]+")
MAX_CARD_BYTES = 256 * 1024
# The draft bounds the description and the title at 100 characters.
MAX_TEXT = 100


def server_card(scheme: str, headers: Mapping[str, str], origin: str, *, announces_changes: bool) -> dict[str, Any]:
    """The card for this deployment, as seen by a request with `scheme` and `headers` from `origin`: every endpoint
    a remote. `announces_changes`: whether the entry serving it holds the streams that announce list changes."""
    conf = get_settings()
    options: Mapping[str, Any] = conf.SERVER_CARD or {}
    name = options["name"]
    card: dict[str, Any] = {"$schema": SCHEMA, "name": name, "version": str(options.get("version", __version__))}
    description = options.get("description") or conf.INSTRUCTIONS or conf.SERVER_TITLE or f"The MCP server {name}."
    card["description"] = _bounded(str(description))
    if conf.SERVER_TITLE:
        card["title"] = _bounded(str(conf.SERVER_TITLE))
    if options.get("websiteUrl"):
        card["websiteUrl"] = options["websiteUrl"]
    required = not conf.ALLOW_ANONYMOUS
    card["remotes"] = [_remote(resource_uri(scheme, headers, endpoint), required) for endpoint in endpoints()]
    card["capabilities"] = {kind: {"listChanged": announces_changes} for kind in ("tools", "resources", "prompts")}
    default = card["remotes"][0]["url"]
    card["_meta"] = {
        "io.github.django-mcp-expose/authorization": {
            "resourceMetadata": metadata_url(default),
            "authorizationServers": authorization_servers(origin),
        }
    }
    return card


def _remote(url: str, required: bool) -> dict[str, Any]:
    return {
        "type": "streamable-http",
        "url": url,
        "supportedProtocolVersions": list(PROTOCOL_VERSIONS),
        "headers": [
            {
                "name": "Authorization",
                "description": "Bearer followed by an OAuth access token or an API key"
                + ("." if required else "; without it, the tools open to anonymous callers."),
                "isRequired": required,
                "isSecret": True,
            }
        ],
        "authentication": {"required": required, "schemes": ["bearer", "oauth2"]},
    }


def _bounded(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1].rstrip() + "…"


def card_body(card: Mapping[str, Any]) -> tuple[bytes, str]:
    """The card as served, and its entity tag (a strong one: the bytes' digest)."""
    body = json.dumps(card, ensure_ascii=False, separators=(",", ":")).encode()
    return body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def card_problem(options: Any) -> str | None:
    """Why MCP_EXPOSE['SERVER_CARD'] cannot be served, or None (None and {} switch the card off)."""
    if not options:
        return None
    if not isinstance(options, Mapping):
        return "it must be a dict such as {'name': 'com.example/library'}"
    name = options.get("name")
    if not isinstance(name, str) or not CARD_NAME.fullmatch(name):
        return "its 'name' must be reverse-DNS with one '/', such as 'com.example/library'"
    return None


@dataclass(frozen=True)
class CardSuggestion:
    """What a fetched card suggests for the registration form."""

    name: str
    url: str
    protocol: str
    title: str = ""


class CardUnreadable(McpExposeError, ValueError):
    """The card could not be fetched or read; the message says why, and nothing the card said."""


def read_card(url: str, timeout: float = 10.0) -> CardSuggestion:
    """Fetch the card at `url` and read its first streamable-http remote. Fetched through the upstream transport:
    the SSRF guard checks the address and the request goes to the address it checked (no second resolution)."""
    try:
        body = anyio.run(_fetch, url, timeout)
    except CardUnreadable:
        raise
    except UpstreamRefused as exc:
        raise CardUnreadable(str(exc)) from None
    except (httpx2.HTTPError, httpx2.InvalidURL, ValueError) as exc:
        raise CardUnreadable(f"The card's address cannot be fetched ({type(exc).__name__}).") from None
    try:
        card = json.loads(body)
    except (ValueError, RecursionError):
        raise CardUnreadable("The card is not JSON.") from None
    return suggestion_from(card)


async def _fetch(url: str, timeout: float) -> bytes:
    transport = BoundedTransport("server card", max_bytes=MAX_CARD_BYTES)
    async with httpx2.AsyncClient(transport=transport, timeout=timeout, follow_redirects=False) as http:
        async with http.stream("GET", url, headers={"Accept": f"{MEDIA_TYPE}, application/json"}) as response:
            if response.status_code != 200:
                raise CardUnreadable(f"{url} answered HTTP {response.status_code}, not a card.")
            body = b""
            async for chunk in response.aiter_raw():
                body += chunk
                if len(body) > MAX_CARD_BYTES:
                    raise CardUnreadable(f"The card is over {MAX_CARD_BYTES} bytes.")
            return body


def suggestion_from(card: Any) -> CardSuggestion:
    if not isinstance(card, dict):
        raise CardUnreadable("The card is not a JSON object.")
    remotes: list[Any] = card["remotes"] if isinstance(card.get("remotes"), list) else []
    remote = next(
        (
            r
            for r in remotes
            if isinstance(r, dict) and r.get("type") == "streamable-http" and isinstance(r.get("url"), str)
        ),
        None,
    )
    if remote is None:
        raise CardUnreadable("The card names no streamable-http remote to connect to.")
    versions = remote.get("supportedProtocolVersions")
    versions = [v for v in versions if isinstance(v, str)] if isinstance(versions, list) else []
    protocol = "2025-11-25" if versions and "2026-07-28" not in versions and "2025-11-25" in versions else "auto"
    raw_name: str = card["name"] if isinstance(card.get("name"), str) else ""
    name = re.sub(r"[^a-z0-9_-]+", "-", raw_name.rsplit("/", 1)[-1].lower()).strip("-")[:32]
    title: str = card["title"] if isinstance(card.get("title"), str) else ""
    return CardSuggestion(name=name, url=str(remote["url"])[:2000], protocol=protocol, title=title[:200])
