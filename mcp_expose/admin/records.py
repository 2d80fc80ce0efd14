"""The read-only records in the admin: the usage log with its summary page, pending confirmations, leaked credentials.

Written by the server, never by hand: nobody may add or change them here."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.translation import gettext_lazy as _

from mcp_expose.models import Confirmation, CredentialLeak, ToolCall


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records written by the server: viewable and deletable, never edited by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    list_display = [
        "created_at",
        "tool_name",
        "username",
        "auth_method",
        "client_id",
        "outcome",
        "duration_ms",
        "depth",
        "protocol_version",
    ]
    list_filter = ["outcome", "tool_name", "auth_method", "protocol_version", "created_at", "client_id", "username"]
    search_fields = ["tool_name", "username", "client_id", "api_key_prefix", "conversation_id", "incident"]
    date_hierarchy = "created_at"
    change_list_template = "admin/mcp_expose/toolcall/change_list.html"

    def get_urls(self) -> list[Any]:
        summary = path("summary/", self.admin_site.admin_view(self.summary_view), name="mcp_expose_toolcall_summary")
        return [summary, *super().get_urls()]

    def summary_view(self, request: HttpRequest) -> HttpResponse:
        """Calls, error and denial rates, p50/p95 latency per tool, for the last day and week."""
        from mcp_expose.calls import usage_writer
        from mcp_expose.operator.charts import bar_chart, meter
        from mcp_expose.operator.usage_report import hourly_calls, summary

        if not self.has_view_permission(request):
            raise PermissionDenied
        report = summary()
        hourly = hourly_calls()
        for window in report["windows"].values():
            for stat in window["tools"]:
                stat["error_meter"] = meter(
                    stat["error_rate"], label=f"{stat['tool']}: error rate {stat['error_rate']:.0%}"
                )
                stat["denial_meter"] = meter(
                    stat["denial_rate"], label=f"{stat['tool']}: denial rate {stat['denial_rate']:.0%}", color="#b8860b"
                )
        peak_p95 = max((stat["p95_ms"] for stat in report["windows"]["day"]["tools"]), default=0) or 1
        for stat in report["windows"]["day"]["tools"]:
            stat["latency_meter"] = meter(
                stat["p95_ms"] / peak_p95, label=f"{stat['tool']}: p95 {stat['p95_ms']} ms", color="#417690"
            )
        series = [
            {
                "tool": tool,
                "total": sum(counts),
                "chart": bar_chart(counts, label=f"{tool}: calls per hour, last 24 hours"),
            }
            for tool, counts in sorted(hourly.items(), key=lambda item: -sum(item[1]))
        ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": _("Tool usage"),
            "report": report,
            "series": series,
            "unwritten": usage_writer.status(),
        }
        return TemplateResponse(request, "admin/mcp_expose/toolcall/summary.html", context)


@admin.register(CredentialLeak)
class CredentialLeakAdmin(ReadOnlyAdmin):
    list_display = ["revoked_at", "kind", "identifier", "user", "client_id", "reason"]
    list_filter = ["kind", "revoked_at"]
    search_fields = ["identifier", "user__username", "client_id"]
    date_hierarchy = "revoked_at"


@admin.register(Confirmation)
class ConfirmationAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "tool_name", "user", "channel", "status", "decided_at", "used_at", "expires_at"]
    list_filter = ["status", "channel", "tool_name", "created_at"]
    search_fields = ["tool_name", "user__username", "caller"]
    date_hierarchy = "created_at"
