"""A Django `HttpRequest` for code that wants one, built from the MCP caller, never from a loopback."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest

from mcp_expose.core.conf import get_settings
from mcp_expose.core.principal import Principal

# Credentials stay with the edge; code reads the caller from request.user / request.auth.
WITHHELD_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})


def build_http_request(
    principal: Principal, headers: Mapping[str, str], method: str = "POST", *, base_url: str = ""
) -> HttpRequest:
    """The request, its host from the `Host` header; without one, from `base_url` (scheme and host), else
    "localhost". Links a view builds (`build_absolute_uri`, hyperlinked serializers) follow it."""
    request = HttpRequest()
    request.method = method
    request.path = request.path_info = get_settings().PATH
    # As a WSGI server fills it (middleware that traces or logs requests reads the scheme from it).
    meta: dict[str, str] = {"REQUEST_METHOD": method, "SCRIPT_NAME": "", "wsgi.url_scheme": "http"}
    for name, value in headers.items():
        lowered = name.lower()
        if lowered in WITHHELD_HEADERS:
            continue
        if lowered == "content-type":
            meta["CONTENT_TYPE"] = value
        elif lowered == "content-length":
            meta["CONTENT_LENGTH"] = value
        else:
            meta["HTTP_" + lowered.upper().replace("-", "_")] = value
    if "HTTP_HOST" not in meta and base_url:
        site = urlsplit(base_url)
        if site.netloc:
            meta["HTTP_HOST"] = site.netloc
            if site.scheme == "https":
                setattr(request, "_get_scheme", lambda: "https")  # noqa: B010  (what build_absolute_uri reads)
                meta["wsgi.url_scheme"] = "https"
    host = meta.get("HTTP_HOST", "localhost")
    meta.setdefault("SERVER_NAME", host.rsplit(":", 1)[0])
    meta.setdefault("SERVER_PORT", host.rsplit(":", 1)[1] if ":" in host else "80")
    request.META = meta
    request.user = principal.user
    request.auth = principal.credential  # type: ignore[attr-defined]
    request.mcp_principal = principal  # type: ignore[attr-defined]
    return request


def request_scheme(scheme: str, headers: Mapping[str, str]) -> str:
    """The scheme the client used, honouring Django's SECURE_PROXY_SSL_HEADER like `HttpRequest.scheme`."""
    proxy_header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy_header:
        name, secure_value = proxy_header
        name = name.lower().removeprefix("http_").replace("_", "-")
        value = headers.get(name)
        if value is not None:
            return "https" if value.split(",", 1)[0].strip() == secure_value else "http"
    return scheme


def origin_allowed(origin: str, own_origin: str, allowed: list[str]) -> bool:
    """Same-origin, or listed (the edge's Origin rule, and the session cookie's). A listed 'scheme://host:*' matches any port of that host."""
    if origin == own_origin:
        return True
    parts = urlsplit(origin)
    for entry in allowed:
        if entry == origin:
            return True
        if entry.endswith(":*"):
            entry_parts = urlsplit(entry[:-2])
            if (parts.scheme, parts.hostname) == (entry_parts.scheme, entry_parts.hostname):
                return True
    return False
