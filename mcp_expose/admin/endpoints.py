"""The admin of endpoints' toolsets: which tools, resources and prompts each MCP endpoint offers."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from mcp_expose.catalog.compiled import provider
from mcp_expose.core.endpoints import Endpoint
from mcp_expose.models import EndpointToolset


@admin.register(EndpointToolset)
class EndpointToolsetAdmin(admin.ModelAdmin):
    """Endpoints are declared in settings (their path and OAuth resource are deployment facts); what each
    offers is chosen here. Rows are made on migrate, one per endpoint."""

    list_display = ["endpoint", "path", "server_name", "chosen", "offered"]
    readonly_fields = ["endpoint", "path", "server_name", "resource", "offered"]
    filter_horizontal = ["capabilities"]
    fieldsets = [
        (None, {"fields": ["endpoint", "path", "server_name", "resource"]}),
        (
            _("What it offers"),
            {
                "fields": ["offer_everything", "tags", "capabilities", "read_only", "offered"],
                "description": _(
                    "Offered: everything, or the capabilities carrying one of the tags or chosen below. Each "
                    "caller then sees what their scopes, permissions and allowed clients let them use."
                ),
            },
        ),
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # one row per endpoint in MCP_EXPOSE["ENDPOINTS"], made on migrate

    @admin.display(description=_("path"))
    def path(self, row: EndpointToolset) -> str:
        endpoint = row.configured
        return endpoint.path if endpoint is not None else str(_("(not in MCP_EXPOSE['ENDPOINTS']: not served)"))

    @admin.display(description=_("server name"))
    def server_name(self, row: EndpointToolset) -> str:
        endpoint = row.configured
        return endpoint.server_name if endpoint is not None else "—"

    @admin.display(description=_("OAuth resource"))
    def resource(self, row: EndpointToolset) -> str:
        endpoint = row.configured
        if endpoint is None:
            return "—"
        return endpoint.resource or str(_("derived from each request (set RESOURCE in production)"))

    @admin.display(description=_("chosen"))
    def chosen(self, row: EndpointToolset) -> str:
        return row.toolset(frozenset(row.capabilities.values_list("key", flat=True))).describe()

    @admin.display(description=_("offered now"))
    def offered(self, row: EndpointToolset) -> str:
        endpoint: Endpoint | None = row.configured
        if endpoint is None:
            return "—"
        view = provider.get_sync().for_endpoint(endpoint)
        return _("%(tools)d tools, %(resources)d resources, %(prompts)d prompts") % {
            "tools": len(view.tools),
            "resources": len(view.resources),
            "prompts": len(view.prompts),
        }
