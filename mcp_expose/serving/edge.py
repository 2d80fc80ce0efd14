"""Checks made on an MCP request before anything reads its body: Host, Origin, size.

Pure functions over headers and settings, so each rule is testable on its own.
The ASGI entry turns a returned `EdgeRefusal` into an HTTP response.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from mcp_expose.core.chain import INSTANCE_HEADER, instance_mark
from mcp_expose.core.conf import get_settings
from mcp_expose.core.requests import origin_allowed, request_scheme


@dataclass(frozen=True, slots=True)
class EdgeRefusal:
    status: int
    error: str
    description: str


def allowed_hosts() -> list[str]:
    """ALLOWED_HOSTS, with Django's own DEBUG fallback to localhost."""
    hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:
        hosts = [".localhost", "127.0.0.1", "[::1]"]
    return hosts


def check_host(headers: Mapping[str, str]) -> EdgeRefusal | None:
    if not host_allowed(headers.get("host", ""), tuple(allowed_hosts())):
        return EdgeRefusal(400, "invalid_host", "The Host header is not one this server answers to.")
    return None


@lru_cache(maxsize=256)
def host_allowed(host: str, hosts: tuple[str, ...]) -> bool:
    """Django's host validation, remembered per Host header and ALLOWED_HOSTS (a client sends the same one on
    every request; any other value costs one check and may push out the oldest)."""
    domain, port = split_domain_port(host)
    bad_port = bool(port) and not (port.isdigit() and 0 < int(port) < 65536)
    return bool(domain) and not bad_port and validate_host(domain, list(hosts))


def check_origin(scheme: str, headers: Mapping[str, str]) -> EdgeRefusal | None:
    """An absent Origin is fine (non-browser clients); a foreign one is a DNS-rebinding or CSRF attempt."""
    origin = headers.get("origin")
    if origin is None:
        return None
    own = f"{request_scheme(scheme, headers)}://{headers.get('host', '')}".lower()
    if not origin_allowed(origin.lower(), own, [entry.lower() for entry in get_settings().ALLOWED_ORIGINS]):
        return EdgeRefusal(403, "forbidden_origin", "Requests from this Origin are not allowed.")
    return None


def check_body_size(headers: Mapping[str, str]) -> EdgeRefusal | None:
    """Refuse a declared oversized body before reading it; the transport also counts streamed bytes."""
    length = headers.get("content-length")
    if length is None:
        return None
    if not length.isdigit():
        return EdgeRefusal(400, "invalid_request", "The Content-Length header is not a number.")
    limit = get_settings().MAX_REQUEST_BODY_SIZE
    if int(length) > limit:
        return EdgeRefusal(413, "request_too_large", f"The request body exceeds {limit} bytes.")
    return None


def check_loop(headers: Mapping[str, str]) -> EdgeRefusal | None:
    """A request carrying our own mark was sent by this deployment to an upstream that is this deployment."""
    mark = headers.get(INSTANCE_HEADER)
    if mark is not None and hmac.compare_digest(mark.encode("utf-8", "surrogatepass"), instance_mark().encode()):
        return EdgeRefusal(
            508, "loop_detected", "This request came from this server itself: an upstream points back at it."
        )
    return None


def check_request(scheme: str, headers: Mapping[str, str]) -> EdgeRefusal | None:
    return check_host(headers) or check_origin(scheme, headers) or check_body_size(headers) or check_loop(headers)
