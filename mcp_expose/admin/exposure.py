"""Exposure rows in the admin: switch tools on and off, set how they are served, try them, and see the overview."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from mcp_expose.catalog.compiled import effective_confirmation, provider
from mcp_expose.core.conf import get_settings
from mcp_expose.declare.json_schemas import thaw
from mcp_expose.declare.names import served_name
from mcp_expose.declare.registry import APPROVAL_PAGE_CHANNEL, Capability, registry
from mcp_expose.models import ExposedTool, ToolCall


class AppLabelFilter(admin.SimpleListFilter):
    title = _("application")
    parameter_name = "app"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        labels = sorted({key.split(".", 1)[0] for key in ExposedTool.objects.values_list("key", flat=True)})
        return [(label, label) for label in labels]

    def queryset(self, request: HttpRequest, queryset: QuerySet[ExposedTool]) -> QuerySet[ExposedTool]:
        if self.value():
            return queryset.filter(key__startswith=f"{self.value()}.")
        return queryset


def _pretty_json(value: Any) -> str:
    if value is None:
        return "—"
    return format_html('<pre class="mcp-json">{}</pre>', json.dumps(thaw(value), indent=2, ensure_ascii=False))


def _searchable(name: str) -> str:
    """A name folded for search: case ignored, and '.', '__' and '_' alike (the separators of the name styles)."""
    return name.casefold().replace("__", ".").replace("_", ".")


def _confirmation_words(required: bool, channel: str) -> str:
    if not required:
        return "—"
    return str(_("on the approval page") if channel == APPROVAL_PAGE_CHANNEL else _("through the client"))


@admin.register(ExposedTool)
class ExposedToolAdmin(admin.ModelAdmin):
    list_display = [
        "tool_name",
        "enabled",
        "kind",
        "ui_display",
        "key",
        "scopes_display",
        "confirmation_display",
        "rate_display",
        "calls_24h",
        "in_code",
        "updated_at",
    ]
    change_form_template = "admin/mcp_expose/exposedtool/change_form.html"
    change_list_template = "admin/mcp_expose/exposedtool/change_list.html"
    list_display_links = ["tool_name"]
    list_editable = ["enabled"]
    list_filter = ["enabled", "stale", AppLabelFilter]
    search_fields = ["key", "wire_name", "title", "description"]
    filter_horizontal = ["allowed_clients"]
    actions = ["enable_selected", "disable_selected"]
    declared_fields: list[Any] = [
        "catalog_lint",
        "declared_name",
        "declared_origin",
        "declared_scopes",
        "declared_permissions",
        "declared_annotations",
        "declared_confirmation",
        "declared_tasks",
        "declared_app",
        "declared_description",
        "input_schema",
        "output_schema",
    ]
    readonly_fields = [
        "key",
        "code_status",
        "effective_annotations",
        "ui_preview",
        *declared_fields,
        "created_at",
        "updated_at",
    ]
    fieldsets = [
        (None, {"fields": ["key", "enabled", "code_status"]}),
        (
            _("How it is offered"),
            {"fields": ["wire_name", "title", "description", "extra_scopes", "allowed_clients", "tags"]},
        ),
        (
            _("Safety"),
            {
                "fields": [
                    "requires_confirmation",
                    "confirmation_channel",
                    "rate_limit",
                    "timeout",
                    "max_result_bytes",
                    "log_argument_values",
                    "tasks_allowed",
                ],
            },
        ),
        (
            _("MCP App"),
            {
                "fields": ["ui_enabled", "ui_preview"],
                "description": _(
                    "Hosts that render MCP Apps show the tool's results with the page its code declares. Off, "
                    "every client gets the tool as text and structured results; the tool itself stays on."
                ),
            },
        ),
        (
            _("Hints to clients"),
            {
                "fields": [
                    "effective_annotations",
                    "read_only_hint",
                    "destructive_hint",
                    "idempotent_hint",
                    "open_world_hint",
                ],
                "description": _("Annotations tell clients how careful to be. Blank keeps what the code declared."),
            },
        ),
        (_("Declared in code"), {"fields": declared_fields}),
        (_("History"), {"fields": ["created_at", "updated_at"], "classes": ["collapse"]}),
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Rows come from declarations in code (migrate, mcp_sync), never from the admin.
        return False

    def get_changelist_form(self, request: HttpRequest, **kwargs: Any) -> Any:
        """The editable 'enabled' checkboxes get a label naming their tool, for screen readers."""
        base = super().get_changelist_form(request, **kwargs)

        class LabelledRowForm(base):  # type: ignore[valid-type,misc]
            def __init__(self, *args: Any, **form_kwargs: Any) -> None:
                super().__init__(*args, **form_kwargs)
                if "enabled" in self.fields and self.instance.pk:
                    self.fields["enabled"].widget.attrs["aria-label"] = f"Enabled: {self.instance}"

        return LabelledRowForm

    @staticmethod
    def _capability(obj: ExposedTool | None) -> Capability | None:
        if obj is None:
            return None
        # Declared in code, or compiled from an approved upstream tool (no declaration to look up).
        return registry.get(obj.key) or provider.get_sync().capabilities.get(obj.key)

    @admin.display(description=_("tool name"), ordering="wire_name")
    def tool_name(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        return served_name(obj.wire_name or (capability.name if capability else obj.key), get_settings().WIRE_NAMES)

    @admin.display(description=_("scopes"))
    def scopes_display(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        scopes = (capability.scopes if capability else frozenset()) | obj.extra_scope_set
        return " ".join(sorted(scopes)) or "—"

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[ExposedTool], search_term: str
    ) -> tuple[QuerySet[ExposedTool], bool]:
        """Also by the names a tool goes by that no column holds: its declared and served names (an upstream
        tool's row keeps only the server's key), with '.', '_' and '__' read alike, so a name typed in either
        style finds the tool whichever style this deployment serves."""
        found, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        term = _searchable(search_term.strip())
        if term:
            keys = [key for key, names in self._names_by_key().items() if any(term in name for name in names)]
            if keys:
                found = found | queryset.filter(key__in=keys)
        return found, may_have_duplicates

    def _names_by_key(self) -> dict[str, set[str]]:
        """Each capability's key and the names it goes by (declared and served), made searchable."""
        style = get_settings().WIRE_NAMES
        capabilities = {**provider.get_sync().capabilities, **{capability.key: capability for capability in registry}}
        rows = dict(ExposedTool.objects.values_list("key", "wire_name"))
        return {
            key: {_searchable(capability.name), _searchable(served_name(rows.get(key) or capability.name, style))}
            for key, capability in capabilities.items()
        }

    def get_queryset(self, request: HttpRequest) -> QuerySet[ExposedTool]:
        since = timezone.now() - timedelta(hours=24)
        recent = (
            ToolCall.objects.filter(tool_key=OuterRef("key"), created_at__gte=since)
            .values("tool_key")
            .annotate(count=Count("pk"))
            .values("count")
        )
        return super().get_queryset(request).annotate(recent_calls=Coalesce(Subquery(recent), 0))

    @admin.display(description=_("kind"))
    def kind(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        return capability.kind if capability else "—"

    @admin.display(description=_("catalog lint"))
    def catalog_lint(self, obj: ExposedTool) -> str:
        from mcp_expose.operator.overview import lint_entry, read_grants_of

        catalog = provider.get_sync()
        entry = next((entry for entry in catalog.tools if entry.key == obj.key), None)
        if entry is None:
            return str(_("Not served (disabled, stale or in conflict)."))
        try:
            lint = lint_entry(entry, read_grants_of(catalog))
        except Exception as exc:  # noqa: BLE001  (a broken declaration is exactly what lint should show)
            return format_html('<span class="errornote">{}</span>', str(exc))
        return format_html(
            "<ul class='mcp-lint'><li>{}: {}</li><li>{}: {}</li><li>{}: {} bytes, about {} tokens</li>{}</ul>",
            _("name length"),
            lint.name_length,
            _("description length"),
            lint.description_length,
            _("definition size"),
            lint.schema_bytes,
            lint.estimated_tokens,
            format_html_join("", "<li class='errornote'>{}</li>", ((problem.message,) for problem in lint.problems)),
        )

    def get_urls(self) -> list[Any]:
        extra = [
            path("overview/", self.admin_site.admin_view(self.overview_view), name="mcp_expose_exposedtool_overview"),
            path("<int:object_id>/try/", self.admin_site.admin_view(self.try_view), name="mcp_expose_exposedtool_try"),
            path(
                "<int:object_id>/ui-preview/",
                self.admin_site.admin_view(self.ui_preview_view),
                name="mcp_expose_exposedtool_ui_preview",
            ),
        ]
        return [*extra, *super().get_urls()]

    def try_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """Call the tool as yourself, through the same dispatcher and policy as MCP clients."""
        from mcp_expose.operator.admin_views import try_tool

        if not request.user.has_perm("mcp_expose.try_exposedtool"):
            raise PermissionDenied
        return try_tool(self, request, object_id)

    def ui_preview_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """The tool's MCP App page as a host gets it, in a sandboxed frame (no data: a host sends that)."""
        from mcp_expose.operator.admin_views import preview_app

        if not self.has_view_permission(request):
            raise PermissionDenied
        return preview_app(self, request, object_id)

    def overview_view(self, request: HttpRequest) -> HttpResponse:
        """What a user, or an OAuth client with given scopes, would see in tools/list, and why not the rest."""
        from mcp_expose.operator.admin_views import catalog_overview

        if not self.has_view_permission(request):
            raise PermissionDenied
        return catalog_overview(self, request)

    @admin.display(description=_("calls (24 h)"), ordering="recent_calls")
    def calls_24h(self, obj: ExposedTool) -> int:
        return getattr(obj, "recent_calls", 0)

    @admin.display(description=_("confirmation"))
    def confirmation_display(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        return _confirmation_words(*effective_confirmation(capability, obj.exposure_state())) if capability else "—"

    @admin.display(description=_("rate limit"))
    def rate_display(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        rates = [rate for rate in (capability.rate_limit if capability else "", obj.rate_limit) if rate]
        return " / ".join(rates) or "—"

    @admin.display(description=_("in code"), boolean=True, ordering="stale")
    def in_code(self, obj: ExposedTool) -> bool:
        """A tick for the rows whose capability the code declares: a cross marks only the stale ones."""
        return not obj.stale

    @admin.display(description=_("in code"))
    def code_status(self, obj: ExposedTool) -> str:
        """Said in words: a bare "stale" flag beside its help text read like an error on every healthy row."""
        if not obj.stale:
            return str(_("Yes: the code declares this capability."))
        return str(
            _(
                "No: the code no longer declares it. The row keeps its settings and usage history, and is never "
                "served; manage.py mcp_sync revives it when the code declares it again."
            )
        )

    @admin.display(description=_("declared name"))
    def declared_name(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        if capability is None:
            return str(_("(no longer in code)"))
        served = served_name(capability.name, get_settings().WIRE_NAMES)
        if served == capability.name:
            return capability.name
        return str(_("%(declared)s (served as %(served)s)") % {"declared": capability.name, "served": served})

    @admin.display(description=_("declared at"))
    def declared_origin(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        return capability.origin if capability else "—"

    @admin.display(description=_("declared scopes"))
    def declared_scopes(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        return " ".join(sorted(capability.scopes)) if capability and capability.scopes else "—"

    @admin.display(description=_("required permissions"))
    def declared_permissions(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        return ", ".join(sorted(capability.permissions)) if capability and capability.permissions else "—"

    @admin.display(description=_("annotations"))
    def declared_annotations(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        return _pretty_json(capability.annotations.as_dict()) if capability else "—"

    @admin.display(description=_("confirmation"))
    def declared_confirmation(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        return _confirmation_words(*effective_confirmation(capability, None)) if capability else "—"

    @admin.display(description=_("MCP tasks"))
    def declared_tasks(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        if capability is None or capability.task_support is None:
            return str(_("never: every call runs directly"))
        if capability.task_support == "required":
            return str(_("required: runs only as a task (clients without tasks get -32021)"))
        return str(_("optional: a task for clients that support them, a direct call for others"))

    @admin.display(description=_("MCP App"))
    def declared_app(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        app = capability.app if capability is not None else None
        if app is None:
            return str(_("none: results are text and structured content"))
        return _pretty_json(
            {"template": app.template, "resourceUri": app.resource_uri, **app.tool_meta(), **app.resource_meta()}
        )

    @admin.display(description=_("UI"))
    def ui_display(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        if capability is None or capability.app is None:
            return "—"
        return capability.app.template if obj.ui_enabled else str(_("off"))

    @admin.display(description=_("preview"))
    def ui_preview(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        if obj.pk is None or capability is None or capability.app is None:
            return "—"
        url = reverse("admin:mcp_expose_exposedtool_ui_preview", args=[obj.pk])
        return format_html('<a href="{}">{}</a>', url, _("Preview the page"))

    @admin.display(description=_("effective annotations"))
    def effective_annotations(self, obj: ExposedTool) -> str:
        entry = next((entry for entry in provider.get_sync().tools if entry.key == obj.key), None)
        return _pretty_json(entry.annotations.as_dict()) if entry is not None else "—"

    @admin.display(description=_("declared description"))
    def declared_description(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        return capability.description if capability and capability.description else "—"

    @admin.display(description=_("input schema"))
    def input_schema(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        return _pretty_json(capability.input_schema) if capability else "—"

    @admin.display(description=_("output schema"))
    def output_schema(self, obj: ExposedTool) -> str:
        capability = self._capability(obj)
        return _pretty_json(capability.output_schema) if capability else "—"

    def _set_enabled(self, request: HttpRequest, queryset: QuerySet[ExposedTool], enabled: bool) -> None:
        changed = 0
        # Saved one by one so each change is logged and signals move the catalog revision.
        for row in queryset.exclude(enabled=enabled):
            row.enabled = enabled
            row.save(update_fields=["enabled", "updated_at"])
            self.log_change(request, row, [{"changed": {"fields": ["enabled"]}}])
            changed += 1
        message = (
            ngettext("%(count)d tool enabled.", "%(count)d tools enabled.", changed)
            if enabled
            else ngettext("%(count)d tool disabled.", "%(count)d tools disabled.", changed)
        )
        self.message_user(request, message % {"count": changed}, messages.SUCCESS)

    @admin.action(description=_("Enable selected tools"), permissions=["change"])
    def enable_selected(self, request: HttpRequest, queryset: QuerySet[ExposedTool]) -> None:
        self._set_enabled(request, queryset, True)

    @admin.action(description=_("Disable selected tools"), permissions=["change"])
    def disable_selected(self, request: HttpRequest, queryset: QuerySet[ExposedTool]) -> None:
        self._set_enabled(request, queryset, False)
