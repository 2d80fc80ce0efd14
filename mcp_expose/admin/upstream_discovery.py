"""*Discover now* in the upstream servers' admin: the action queues a discovery per server and returns at once; the
list and the server's page show how each stands, and ask again while one is queued or running.

The asking is `mcp_expose/discovery-status.js`, a static file (no inline script, so a CSP may forbid those): it
reads the status endpoint (`<id>/discovery/`, JSON, for whoever may view the server) every few seconds, and offers
to reload the page once the discovery ended, since the page's other fields are from before it.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from mcp_expose.models import UpstreamServer
from mcp_expose.upstream.queued_discovery import AlreadyQueued, NotQueued, queue, standing, summary

# How often the pages ask how a queued or running discovery stands, in milliseconds.
POLL_MS = 2000


class DiscoverNowAdmin(admin.ModelAdmin):
    """The action, the column and the status endpoint; `UpstreamServerAdmin` is the rest."""

    class Media:
        js = ["mcp_expose/discovery-status.js"]

    def get_urls(self) -> list[Any]:
        status = path(
            "<int:object_id>/discovery/",
            self.admin_site.admin_view(self.discovery_status_view),
            name="mcp_expose_upstreamserver_discovery",
        )
        return [status, *super().get_urls()]

    def discovery_status_view(self, request: HttpRequest, object_id: int) -> JsonResponse:
        """How the server's last *Discover now* stands, for the pages' script (and anyone who may view it)."""
        server = get_object_or_404(UpstreamServer, pk=object_id)
        if not self.has_view_permission(request, server):
            raise PermissionDenied
        now = standing(server)
        return JsonResponse({"state": now.state, "active": now.active, "label": now.label})

    @admin.display(description=gettext_lazy("queued discovery"))
    def discovery_status(self, obj: UpstreamServer) -> str:
        now = standing(obj)
        if not now.state:
            return "—"
        return format_html(
            '<span class="mcp-discovery" role="status" data-state="{}" data-active="{}" data-status-url="{}" '
            'data-poll-ms="{}" data-reload-label="{}">{}</span>',
            now.state,
            "true" if now.active else "false",
            reverse("admin:mcp_expose_upstreamserver_discovery", args=[obj.pk]),
            POLL_MS,
            _("Reload the page to see what it read."),
            now.label,
        )

    def has_discover_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("mcp_expose.discover_upstreamserver")

    @admin.action(description=gettext_lazy("Discover now"), permissions=["discover"])
    def discover_now(self, request: HttpRequest, queryset: QuerySet[UpstreamServer]) -> None:
        for server in queryset:
            try:
                row = queue(server)
            except AlreadyQueued as exc:
                self.message_user(request, f"{server.name}: {exc}", messages.WARNING)
                continue
            except NotQueued as exc:
                self.message_user(request, f"{server.name}: {exc}", messages.ERROR)
                continue
            self.log_change(request, server, "Discovery queued.")
            self._say_how_it_stands(request, row)

    def _say_how_it_stands(self, request: HttpRequest, server: UpstreamServer) -> None:
        """Queued, or (an immediate backend ran it in this request) what it read."""
        now = standing(server)
        outcome = server.discovery_outcome or {}
        if now.state == UpstreamServer.DiscoveryState.DONE:
            level = messages.WARNING if outcome.get("refused") else messages.SUCCESS
            self.message_user(request, f"{server.name}: {summary(outcome)}", level)
        elif now.state == UpstreamServer.DiscoveryState.FAILED:
            self.message_user(request, f"{server.name}: {outcome.get('error') or now.label}", messages.ERROR)
        else:
            self.message_user(
                request,
                _("%(server)s: discovery queued; its state shows in the “queued discovery” column.")
                % {"server": server.name},
                messages.INFO,
            )
