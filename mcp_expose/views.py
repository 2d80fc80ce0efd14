"""Pages people open in a browser: how to connect a client."""

from __future__ import annotations

import json
from typing import Any, cast

from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse

from mcp_expose.access.protected_resource import resource_uri
from mcp_expose.catalog.compiled import provider
from mcp_expose.core.conf import get_settings
from mcp_expose.core.endpoints import endpoints


def _request_headers(request: HttpRequest) -> dict[str, str]:
    return {name.lower(): value for name, value in request.headers.items()}


@login_required
def connect(request: HttpRequest) -> HttpResponse:
    """Every endpoint, and for the one chosen (`?endpoint=name`, the default's otherwise): its URL, ready-to-paste
    client configurations, the scopes, and API keys."""
    from django.http import Http404
    from oauth2_provider.settings import oauth2_settings

    conf = get_settings()
    scheme, headers = request.scheme or "http", _request_headers(request)
    whole = provider.get_sync()
    listed: list[dict[str, Any]] = [
        {
            "endpoint": endpoint,
            "url": resource_uri(scheme, headers, endpoint),
            "toolset": whole.toolset_of(endpoint).describe(),
            "tools": len(whole.for_endpoint(endpoint).tools),
        }
        for endpoint in endpoints()
    ]
    chosen = next((item for item in listed if item["endpoint"].name == request.GET.get("endpoint", "default")), None)
    if chosen is None:
        raise Http404("No MCP endpoint has that name.")
    endpoint = chosen["endpoint"]
    url = chosen["url"]
    name = endpoint.server_name
    catalog = whole.for_endpoint(endpoint)
    scopes = [
        {
            "scope": scope,
            "description": description,
            "tools": [entry.title or entry.name for entry in catalog.tools if scope in entry.scopes],
        }
        for scope, description in oauth2_settings.SCOPES.items()
    ]
    try:
        api_key_url = reverse("admin:mcp_expose_apikey_add") if request.user.is_staff else None
    except NoReverseMatch:
        api_key_url = None
    configs = [
        ("Claude Code", "shell", f"claude mcp add --transport http {name} {url}"),
        (
            "Claude Desktop and claude.ai",
            "text",
            f"Settings → Connectors → Add custom connector.\nName: {name}\nURL: {url}",
        ),
        (
            "VS Code (.vscode/mcp.json)",
            "json",
            json.dumps({"servers": {name: {"type": "http", "url": url}}}, indent=2),
        ),
        ("Cursor (~/.cursor/mcp.json)", "json", json.dumps({"mcpServers": {name: {"url": url}}}, indent=2)),
        (
            "MCP Inspector",
            "shell",
            f"npx @modelcontextprotocol/inspector\n# Transport: Streamable HTTP, URL: {url}, then Connect (OAuth runs in the browser)",
        ),
        (
            "MCP Inspector CLI, with an API key",
            "shell",
            f"npx @modelcontextprotocol/inspector --cli {url} --transport http --method tools/list \\\n"
            f'  --header "Authorization: Bearer $MCP_API_KEY"',
        ),
    ]
    return render(
        request,
        "mcp_expose/connect.html",
        {
            "mcp_url": url,
            "endpoint": endpoint,
            "endpoints": listed,
            "configs": configs,
            "scopes": scopes,
            "base_scope": conf.BASE_SCOPE,
            "api_key_url": api_key_url,
        },
    )


@login_required
def approve(request: HttpRequest, confirmation_id: str) -> HttpResponse:
    """Show one pending call to the user it belongs to; record their yes or no (POST, CSRF-protected)."""
    from django.http import Http404
    from django.utils import timezone

    from mcp_expose.models import Confirmation

    confirmation = Confirmation.objects.filter(pk=confirmation_id, user=cast(Any, request.user)).first()
    if confirmation is None:
        # Someone else's confirmation is as invisible as a missing one.
        raise Http404("No such confirmation.")
    if confirmation.status == Confirmation.Status.PENDING and confirmation.is_expired:
        Confirmation.objects.filter(pk=confirmation.pk, status=Confirmation.Status.PENDING).update(
            status=Confirmation.Status.EXPIRED
        )
        confirmation.refresh_from_db()
    answered = False
    if request.method == "POST" and confirmation.status == Confirmation.Status.PENDING:
        approved = "approve" in request.POST
        moved = Confirmation.objects.filter(
            pk=confirmation.pk, status=Confirmation.Status.PENDING, expires_at__gt=timezone.now()
        ).update(
            status=Confirmation.Status.APPROVED if approved else Confirmation.Status.DECLINED,
            decided_at=timezone.now(),
        )
        confirmation.refresh_from_db()
        answered = bool(moved)
    return render(
        request,
        "mcp_expose/approve.html",
        {
            "confirmation": confirmation,
            "arguments": json.dumps(confirmation.arguments, indent=2, sort_keys=True, ensure_ascii=False),
            "answered": answered,
            "pending": confirmation.status == Confirmation.Status.PENDING,
        },
    )


@staff_member_required
def usage_summary_json(request: HttpRequest) -> HttpResponse:
    """Calls, error and denial rates and p50/p95 latency per tool, for the last day and week (staff only)."""
    from django.core.exceptions import PermissionDenied
    from django.http import JsonResponse

    from mcp_expose.operator.usage_report import summary

    if not request.user.has_perm("mcp_expose.view_toolcall"):
        raise PermissionDenied
    return JsonResponse(summary())


def server_card(request: HttpRequest) -> HttpResponse:
    """Our SEP-2127 server card, when MCP_EXPOSE['SERVER_CARD'] names us; 404 otherwise. Public, like the
    protected resource metadata: it holds nothing a caller's credentials would add. Revalidated by its ETag."""
    from django.core.handlers.asgi import ASGIRequest
    from django.http import Http404

    from mcp_expose.access.protected_resource import request_origin
    from mcp_expose.operator.server_card import MEDIA_TYPE, card_body
    from mcp_expose.operator.server_card import server_card as build_card

    if not get_settings().SERVER_CARD:
        raise Http404("This server publishes no server card.")
    cors = {
        "Access-Control-Allow-Origin": "*",
        "Access-Control-Allow-Methods": "GET",
        "Access-Control-Allow-Headers": "Content-Type, If-None-Match",
        "Access-Control-Expose-Headers": "ETag",
    }
    if request.method == "OPTIONS":
        return HttpResponse(status=204, headers=cors)
    if request.method not in ("GET", "HEAD"):
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD, OPTIONS"})
    headers = _request_headers(request)
    scheme = request.scheme or "http"
    # Lists are announced as they change by the ASGI entry's streams; a process serving WSGI holds none.
    announces = isinstance(request, ASGIRequest)
    card = build_card(scheme, headers, request_origin(scheme, headers), announces_changes=announces)
    body, etag = card_body(card)
    cached = {**cors, "Cache-Control": "public, max-age=3600", "ETag": etag}
    # RFC 9110 13.1.2: a weak comparison (a proxy that compresses the card weakens its tag), and "*".
    offered = [tag.strip().removeprefix("W/") for tag in request.headers.get("If-None-Match", "").split(",")]
    if etag in offered or "*" in offered:
        return HttpResponse(status=304, headers=cached)
    return HttpResponse(body, content_type=MEDIA_TYPE, headers=cached)
