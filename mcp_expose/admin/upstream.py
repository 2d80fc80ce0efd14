"""Upstream servers in the admin: register one (its secrets write-only), discover its tools, approve them."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from mcp_expose.admin.upstream_discovery import DiscoverNowAdmin
from mcp_expose.admin.upstream_forms import UpstreamServerForm, origin_of
from mcp_expose.models import UpstreamServer, UpstreamTool
from mcp_expose.operator.upstream_review import approved_label, definition_diff
from mcp_expose.upstream.snapshots import NothingToApprove, approve

# What the server's page shows of its last discovery and its calls: read-only, in this order.
LAST_DISCOVERY: list[Any] = [
    "discovery_status",
    "discovered_at",
    "protocol_version",
    "server_info",
    "discovery_error",
    "diagnostics_list",
    "breaker",
]


@admin.register(UpstreamServer)
class UpstreamServerAdmin(DiscoverNowAdmin):
    form = UpstreamServerForm
    list_display = [
        "name",
        "url",
        "enabled",
        "protocol",
        "discovered_at",
        "discovery_status",
        "health",
        "breaker",
        "tool_counts",
    ]
    list_filter = ["enabled", "protocol", "authentication"]
    search_fields = ["name", "url"]
    actions = ["discover_now"]
    readonly_fields = ["stored_headers", "stored_client_secret", *LAST_DISCOVERY]
    fieldsets = [
        (None, {"fields": ["name", "url", "enabled", "protocol", "connect_timeout", "call_timeout"]}),
        (_("Authentication"), {"fields": ["authentication", "stored_headers", "headers", "clear_headers"]}),
        (
            _("OAuth 2.1 client credentials"),
            {
                "fields": [
                    "oauth_token_url",
                    "oauth_client_id",
                    "stored_client_secret",
                    "client_secret",
                    "oauth_scopes",
                    "oauth_resource",
                ]
            },
        ),
        (
            _("Last discovery"),
            {"fields": LAST_DISCOVERY},
        ),
    ]

    change_list_template = "admin/mcp_expose/upstreamserver/change_list.html"

    def get_urls(self) -> list[Any]:
        card = path(
            "from-card/", self.admin_site.admin_view(self.from_card_view), name="mcp_expose_upstreamserver_from_card"
        )
        return [card, *super().get_urls()]

    def from_card_view(self, request: HttpRequest) -> HttpResponse:
        """Read another server's card and open the registration form filled from it (nothing is saved here)."""
        from mcp_expose.operator.server_card import CardUnreadable, read_card

        if not self.has_add_permission(request):
            raise PermissionDenied
        context = {**self.admin_site.each_context(request), "opts": self.model._meta, "error": "", "card_url": ""}
        if request.method == "POST":
            card_url = str(request.POST.get("card_url", ""))[:2000]
            context["card_url"] = card_url
            try:
                suggestion = read_card(card_url)
            except CardUnreadable as exc:
                context["error"] = str(exc)
            else:
                query = urlencode({"name": suggestion.name, "url": suggestion.url, "protocol": suggestion.protocol})
                return HttpResponseRedirect(reverse("admin:mcp_expose_upstreamserver_add") + "?" + query)
        return TemplateResponse(request, "admin/mcp_expose/upstreamserver/from_card.html", context)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        form.own_origin = origin_of(request.build_absolute_uri("/"))  # type: ignore[attr-defined]
        return form

    def get_queryset(self, request: HttpRequest) -> QuerySet[UpstreamServer]:
        Status = UpstreamTool.Status
        return (
            super()
            .get_queryset(request)
            .annotate(
                approved_count=Count("tools", filter=Q(tools__status__in=[Status.APPROVED, Status.CHANGED])),
                pending_count=Count("tools", filter=Q(tools__status__in=[Status.PENDING, Status.CHANGED])),
                blocked_count=Count("tools", filter=Q(tools__status=Status.BLOCKED)),
            )
        )

    @admin.display(description=_("tools (approved / waiting / blocked)"))
    def tool_counts(self, obj: Any) -> str:
        return f"{obj.approved_count} / {obj.pending_count} / {obj.blocked_count}"

    @admin.display(description=_("health"))
    def health(self, obj: UpstreamServer) -> str:
        if obj.discovered_at is None:
            return str(_("never discovered"))
        if obj.discovery_error:
            return str(_("not reached: %(error)s") % {"error": obj.discovery_error[:120]})
        return str(_("read; %(count)d entries refused") % {"count": len(obj.diagnostics or [])})

    @admin.display(description=_("calls (this process)"))
    def breaker(self, obj: UpstreamServer) -> str:
        """The circuit breaker of the process serving this page: each process keeps its own."""
        from mcp_expose.upstream.calling import breaker

        guard = breaker()
        state = guard.state(obj.pk)
        if state == "closed":
            failures = guard.failures(obj.pk)
            return str(_("passing") if not failures else _("passing; %(count)d failed in a row") % {"count": failures})
        return str(_("failing fast (breaker open)") if state == "open" else _("probing (breaker half-open)"))

    @admin.display(description=_("stored client secret"))
    def stored_client_secret(self, obj: UpstreamServer) -> str:
        return str(_("set (hidden)") if obj.sealed_client_secret else _("none"))

    @admin.display(description=_("stored headers"))
    def stored_headers(self, obj: UpstreamServer) -> str:
        return str(_("set (values hidden)") if obj.sealed_headers else _("none"))

    @admin.display(description=_("diagnostics"))
    def diagnostics_list(self, obj: UpstreamServer) -> str:
        entries = obj.diagnostics or []
        if not entries:
            return "—"
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "",
                "<li><code>{}</code> {}: {}</li>",
                ((entry.get("tool") or "—", entry.get("field"), entry.get("problem")) for entry in entries),
            ),
        )


@admin.register(UpstreamTool)
class UpstreamToolAdmin(admin.ModelAdmin):
    list_display = ["__str__", "status", "last_seen", "approved_at", "approved_by"]
    list_filter = ["status", "server"]
    search_fields = ["name", "server__name"]
    actions = ["block_selected", "unblock_selected"]
    fields = ["server", "name", "status", "block_reason", "approved_at", "approved_by", "last_seen", "review"]
    readonly_fields = ["server", "name", "status", "block_reason", "approved_at", "approved_by", "last_seen", "review"]
    change_form_template = "admin/mcp_expose/upstreamtool/change_form.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tools come from discovery only

    def has_approve_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("mcp_expose.approve_upstreamtool")

    @admin.display(description=_("definition"))
    def review(self, obj: UpstreamTool) -> str:
        if obj.proposed is None:
            return format_html(
                "<pre>{}</pre>", definition_diff(None, obj.approved).split("\n", 2)[-1] if obj.approved else "—"
            )
        label = approved_label(obj.as_served() is not None, str(obj.get_status_display()).lower())
        return format_html('<pre class="mcp-diff">{}</pre>', definition_diff(obj.approved, obj.proposed, label))

    def get_urls(self) -> list[Any]:
        extra = [
            path(
                "<int:object_id>/approve/",
                self.admin_site.admin_view(self.approve_view),
                name="mcp_expose_upstreamtool_approve",
            )
        ]
        return [*extra, *super().get_urls()]

    def approve_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """Approve the proposed definition shown on the change page (its digest travels with the form)."""
        return require_POST(self._approve)(request, object_id)

    def _approve(self, request: HttpRequest, object_id: int) -> HttpResponse:
        if not self.has_approve_permission(request):
            raise PermissionDenied
        tool = get_object_or_404(UpstreamTool, pk=object_id)
        try:
            approve(tool, request.user, str(request.POST.get("digest", "")))
        except NothingToApprove as exc:
            self.message_user(request, str(exc), messages.ERROR)
        else:
            self.log_change(request, tool, [{"changed": {"fields": ["approved"]}}])
            self.message_user(
                request, _("%(tool)s: the definition shown is approved.") % {"tool": tool}, messages.SUCCESS
            )
        return HttpResponseRedirect(reverse("admin:mcp_expose_upstreamtool_change", args=[object_id]))

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        context = {**(extra_context or {}), "can_approve": self.has_approve_permission(request)}
        return super().change_view(request, object_id, form_url, context)

    @admin.action(description=_("Block selected tools"), permissions=["approve"])
    def block_selected(self, request: HttpRequest, queryset: QuerySet[UpstreamTool]) -> None:
        for tool in queryset.exclude(status=UpstreamTool.Status.BLOCKED):
            tool.status, tool.block_reason = UpstreamTool.Status.BLOCKED, f"Blocked by {request.user}."
            tool.save(update_fields=["status", "block_reason"])
            self.log_change(request, tool, [{"changed": {"fields": ["status"]}}])

    @admin.action(description=_("Unblock selected tools"), permissions=["approve"])
    def unblock_selected(self, request: HttpRequest, queryset: QuerySet[UpstreamTool]) -> None:
        Status = UpstreamTool.Status
        for tool in queryset.filter(status=Status.BLOCKED):
            tool.status = (Status.CHANGED if tool.proposed else Status.APPROVED) if tool.approved else Status.PENDING
            tool.block_reason = ""
            tool.save(update_fields=["status", "block_reason"])
            self.log_change(request, tool, [{"changed": {"fields": ["status"]}}])
