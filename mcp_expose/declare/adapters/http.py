"""Run a view in-process for an MCP call, and read its response as a tool result.

The request is a plain `HttpRequest` carrying the caller: no loopback, no test
client, no change to the view. The project's middleware does not run (only what
`VIEW_MIDDLEWARE` names, see `middleware.py`), so what Django's own would have
provided is set here: the user, an unsaved session, message storage.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import re
import secrets
from collections.abc import Mapping
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse, QueryDict
from django.urls import NoReverseMatch, reverse

from mcp_expose.core.content import ContentBundle, EmbeddedResource
from mcp_expose.core.context import InvocationContext
from mcp_expose.core.errors import AccessDenied, Conflict, InvalidInput, McpExposeError, NotFound, ToolError
from mcp_expose.core.requests import build_http_request


class RateLimitedByView(ToolError):
    code = "rate_limited"
    default_message = "The view refused the call: too many requests."


class ViewRefused(ToolError):
    """A 4xx the other codes do not name; `details.status` says which."""

    code = "view_refused"
    default_message = "The view refused the call."


# The 4xx answers with a code of their own, beyond those the error taxonomy names.
STATUS_CODES: Mapping[int, str] = {
    405: "method_not_allowed",
    406: "not_acceptable",
    410: "gone",
    412: "precondition_failed",
    413: "too_large",
    415: "unsupported_media_type",
}


class ViewFailed(McpExposeError):
    """A view answered 5xx; the details go to the log, the client sees an internal error."""


def view_request(
    context: InvocationContext,
    method: str,
    url_name: str,
    kwargs: Mapping[str, Any],
    query: Mapping[str, Any],
    body: Mapping[str, Any] | None,
    *,
    encoding: str = "json",
    files: Mapping[str, Any] | None = None,
) -> HttpRequest:
    """The request the view sees. `encoding` is how the body travels: "json", "form" or "multipart" (with
    `files`, name → `UploadedFile`)."""
    try:
        path = reverse(url_name, kwargs={key: str(value) for key, value in kwargs.items()})
    except NoReverseMatch:
        # The URL arguments fit no route: over HTTP the same path is a 404.
        raise NotFound("No such page: the URL arguments do not match the view's route.") from None
    return request_at_path(context, method, path, query, body, encoding=encoding, files=files)


def request_at_path(
    context: InvocationContext,
    method: str,
    path: str,
    query: Mapping[str, Any],
    body: Mapping[str, Any] | None,
    *,
    encoding: str = "json",
    files: Mapping[str, Any] | None = None,
    parse_multipart: bool = False,
) -> HttpRequest:
    """`view_request` for a path already known: the caller, the query, the body as `encoding` says.
    `parse_multipart`: fill `request.POST` and `request.FILES` from a multipart body, as Django's handler would
    for views that read them (DRF's parsers read the body themselves)."""
    request = build_http_request(context.principal, context.headers, method, base_url=context.base_url)
    request.path = request.path_info = path
    query_string = urlencode(_flatten(query), doseq=True)
    request.META["QUERY_STRING"] = query_string
    request.GET = QueryDict(query_string)
    form_encoded = encoding != "json"
    if body is not None:
        if encoding == "multipart":
            from django.test.client import encode_multipart

            fields: dict[str, Any] = {key: value for key, value in _flatten_grouped(body).items()}
            fields.update(files or {})
            # A boundary no caller can know, so that no value (or file) can end its part and start another.
            boundary = secrets.token_hex(24)
            payload = encode_multipart(boundary, fields)
            content_type = f"multipart/form-data; boundary={boundary}"
        elif form_encoded:
            payload = urlencode(_flatten(body), doseq=True).encode()
            content_type = "application/x-www-form-urlencoded"
        else:
            payload = json.dumps(body).encode()
            content_type = "application/json"
        request.META["CONTENT_TYPE"] = content_type
        request.META["CONTENT_LENGTH"] = str(len(payload))
        request._set_content_type_params(request.META)  # type: ignore[attr-defined]
        request._stream = io.BytesIO(payload)
        request._read_started = False  # type: ignore[attr-defined]
        if encoding == "form":
            # A bare HttpRequest keeps POST as a plain attribute; Django views read the form from it.
            request.POST = QueryDict(payload)
        elif encoding == "multipart" and parse_multipart:
            from django.http.multipartparser import MultiPartParser

            request.POST, request.FILES = MultiPartParser(  # type: ignore[assignment]
                request.META, io.BytesIO(payload), request.upload_handlers
            ).parse()
    if context.client_address:
        request.META["REMOTE_ADDR"] = context.client_address
    # The caller, for Django views (request.user) and DRF views (their authentication result).
    request.user = context.principal.user
    force_authentication(request, context.principal)
    # The caller authenticated with a bearer credential, not a browser cookie: CSRF does not apply.
    request._dont_enforce_csrf_checks = True  # type: ignore[attr-defined]
    _attach_session_and_messages(request)
    return request


def force_authentication(request: HttpRequest, principal: Any) -> None:
    """Give a DRF view the caller as its authentication result. A caller with neither a signed-in user nor a
    credential is left unauthenticated, so that the view refuses it as it refuses an anonymous HTTP request
    ("Authentication credentials were not provided."), not as a signed-in user without permission."""
    user, credential = principal.user, principal.credential
    if getattr(user, "is_authenticated", False) or credential is not None:
        request._force_auth_user = user  # type: ignore[attr-defined]
        request._force_auth_token = credential  # type: ignore[attr-defined]


def _flatten(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    pairs = []
    for key, value in values.items():
        if value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            pairs.append((key, "true" if item is True else "false" if item is False else str(item)))
    return pairs


def _flatten_grouped(values: Mapping[str, Any]) -> dict[str, list[str]]:
    """`_flatten`'s pairs grouped by name, as a multipart body takes them (a list repeats its key)."""
    grouped: dict[str, list[str]] = {}
    for key, value in _flatten(values):
        grouped.setdefault(key, []).append(value)
    return grouped


def _attach_session_and_messages(request: HttpRequest) -> None:
    from django.apps import apps

    if apps.is_installed("django.contrib.sessions"):
        from importlib import import_module

        request.session = import_module(settings.SESSION_ENGINE).SessionStore()  # never saved
    if apps.is_installed("django.contrib.messages"):
        from django.contrib.messages.storage.cookie import CookieStorage

        request._messages = CookieStorage(request)  # type: ignore[attr-defined]


def raise_for_status(response: HttpResponse, data: Any) -> None:
    """Turn a refusal into the matching tool error; 5xx into `ViewFailed`."""
    status = response.status_code
    if status < 400:
        return
    detail = _detail(data) or response.reason_phrase
    if status in (400, 422):
        raise InvalidInput("The view refused the arguments.", details=field_errors(data))
    if status in (401, 403):
        raise AccessDenied(detail)
    if status == 404:
        raise NotFound(detail)
    if status == 409:
        raise Conflict(detail)
    if status == 429:
        retry_after = _retry_after(response)
        raise RateLimitedByView(detail, details={"retry_after": retry_after} if retry_after is not None else None)
    if status >= 500:
        raise ViewFailed(f"the view answered {status}")
    refused = ViewRefused(detail, details={"status": status})
    refused.code = STATUS_CODES.get(status, ViewRefused.code)
    raise refused


def _detail(data: Any) -> str:
    if isinstance(data, Mapping) and isinstance(data.get("detail"), str):
        return str(data["detail"])
    return ""


def _retry_after(response: HttpResponse) -> int | None:
    value = response.headers.get("Retry-After", "")
    return int(value) if value.isdigit() else None


def field_errors(data: Any, path: str = "$") -> list[dict[str, str]]:
    """DRF-style errors ({"field": ["msg"], "nested": {...}, "items": [{...}]}) as JSON paths."""
    problems: list[dict[str, str]] = []
    if isinstance(data, Mapping):
        for key, value in data.items():
            child = path if key in ("non_field_errors", "__all__", "detail") else f"{path}.{key}"
            problems.extend(field_errors(value, child))
    elif isinstance(data, list):
        if all(isinstance(item, str) for item in data):
            problems.extend({"path": path, "message": str(item)} for item in data)
        else:
            for index, item in enumerate(data):
                problems.extend(field_errors(item, f"{path}[{index}]"))
    elif data:
        problems.append({"path": path, "message": str(data)})
    return problems


def drf_result(response: HttpResponse, request: HttpRequest) -> Any:
    """What a DRF view answered: its data; or, for a plain Django response (a CSV, a PDF), the content as
    content: JSON as data, text with its media type, anything else as an embedded blob."""
    if hasattr(response, "data"):
        return response.data
    body = _body(response)
    content_type = response.headers.get("Content-Type", "application/octet-stream")
    media_type = content_type.split(";", 1)[0].strip().lower()
    if response.status_code >= 400 or media_type == "application/json" or media_type.endswith("+json"):
        text = body.decode(response.charset or "utf-8", errors="replace")
        try:
            return json.loads(text) if text else None
        except ValueError:
            return text
    uri = request.build_absolute_uri()
    if media_type.startswith("text/") or media_type in TEXT_MEDIA_TYPES or media_type.endswith("+xml"):
        text = body.decode(response.charset or "utf-8", errors="replace")
        return ContentBundle((EmbeddedResource(uri, text=text, mime_type=media_type),))
    return ContentBundle((EmbeddedResource(uri, blob=body, mime_type=media_type),))


TEXT_MEDIA_TYPES = frozenset({"application/xml", "application/javascript", "application/x-ndjson", "application/yaml"})


def uploaded_file(value: Mapping[str, Any], name: str) -> Any:
    """A file argument (`{"filename", "content_base64", "content_type"?}`) as the upload a view receives."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    try:
        content = base64.b64decode(value["content_base64"], validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(
            "A file is not valid base64.",
            details=[{"path": f"$.{name}.content_base64", "message": "Not valid base64."}],
        ) from None
    return SimpleUploadedFile(value["filename"], content, value.get("content_type") or "application/octet-stream")


def _body(response: HttpResponse) -> bytes:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)  # type: ignore[attr-defined]
    if hasattr(response, "render") and not getattr(response, "is_rendered", True):
        response.render()
    return bytes(response.content)


def response_data(response: HttpResponse, html: str) -> Any:
    """What a response says: a DRF response's data, else its content (a plain response from the view, or
    from a middleware that answered by itself)."""
    if hasattr(response, "data"):
        return response.data
    return content_of(response, html)


def content_of(response: HttpResponse, html: str) -> Any:
    """A non-DRF response's payload: JSON as data, HTML as text (the <main> element's, with html="main")."""
    body = _body(response)
    content_type = response.headers.get("Content-Type", "")
    text = body.decode(response.charset or "utf-8", errors="replace")
    if "json" in content_type:
        return json.loads(text) if text else None
    if "html" in content_type and html != "raw":
        return html_text(text, main_only=html == "main")
    return text


def redirect_location(response: HttpResponse) -> str | None:
    if response.status_code in (301, 302, 303, 307, 308):
        return response.headers.get("Location")
    return None


def is_login_redirect(location: str) -> bool:
    login_url = settings.LOGIN_URL
    try:
        login_path = reverse(login_url) if "/" not in str(login_url) else str(login_url)
    except Exception:  # noqa: BLE001  (a URL that does not reverse is compared as written)
        login_path = str(login_url)
    return urlsplit(location).path == urlsplit(login_path).path


class _TextExtractor(HTMLParser):
    SKIP = {"script", "style", "head", "title", "noscript", "template"}
    BLOCK = {
        "p",
        "div",
        "li",
        "tr",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "br",
        "section",
        "article",
        "main",
        "table",
        "ul",
        "ol",
    }

    def __init__(self, main_only: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.main_only = main_only
        self.depth_in_main = 0
        self.skipping = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "main":
            self.depth_in_main += 1
        if tag in self.SKIP:
            self.skipping += 1
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "main":
            self.depth_in_main = max(0, self.depth_in_main - 1)
        if tag in self.SKIP:
            self.skipping = max(0, self.skipping - 1)
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.skipping or (self.main_only and not self.depth_in_main):
            return
        self.parts.append(data)


def html_text(html: str, *, main_only: bool = False) -> str:
    extractor = _TextExtractor(main_only)
    extractor.feed(html)
    text = "".join(extractor.parts)
    if main_only and not text.strip():
        return html_text(html)  # no <main>: the whole page
    lines = [re.sub(r"\s+", " ", line).strip() for line in text.splitlines()]
    return "\n".join(line for line in lines if line)
