"""The admin pages around the exposure rows: try a tool, and see the catalog through a caller's eyes."""

from __future__ import annotations

import json
from typing import Any, cast

from asgiref.sync import async_to_sync
from django import forms
from django.contrib.auth import get_user_model
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from mcp_expose.access.scopes import expand_scopes
from mcp_expose.calls.app_pages import PageFailed, render_app
from mcp_expose.calls.dispatch import CallRequest, call_tool
from mcp_expose.catalog.compiled import CatalogProvider, provider
from mcp_expose.core.asking import TaskRequired
from mcp_expose.core.conf import get_settings
from mcp_expose.core.errors import UnknownTool
from mcp_expose.core.principal import principal_for_user
from mcp_expose.declare.names import served_name
from mcp_expose.models import ExposedTool
from mcp_expose.operator.overview import explain, lint_catalog
from mcp_expose.operator.tryit import form_fields, parse_submission
from mcp_expose.serving.wire import render_outcome

StrOrPromise = str | Promise  # a title, translated lazily or not


def _context(model_admin: Any, request: HttpRequest, title: StrOrPromise, **extra: Any) -> dict[str, Any]:
    return {**model_admin.admin_site.each_context(request), "opts": model_admin.opts, "title": title, **extra}


def _all_scopes(catalog: Any) -> frozenset[str]:
    return frozenset().union(*(entry.scopes for entry in catalog.tools))


def try_tool(model_admin: Any, request: HttpRequest, object_id: int) -> HttpResponse:
    row = ExposedTool.objects.filter(pk=object_id).first()
    catalog = provider.get_sync()
    entry = next((entry for entry in catalog.tools if row is not None and entry.key == row.key), None)
    if entry is None:
        raise Http404("This tool is not served (disabled, stale or in conflict).")
    writes = not entry.annotations.read_only
    result = None
    errors: list[str] = []
    submitted: dict[str, str] = {}
    principal = principal_for_user(request.user, _all_scopes(catalog), "local", via="admin")
    schema = entry.input_schema_for(principal)  # a view whose serializer depends on who calls: yours
    if request.method == "POST":
        submitted = {
            key.removeprefix("arg_"): str(value) for key, value in request.POST.items() if key.startswith("arg_")
        }
        arguments, errors = parse_submission(schema, request.POST)
        if writes and request.POST.get("confirm_write") != "on":
            errors.append(str(_("This tool may change data: tick the confirmation box to run it.")))
        if not errors:
            call = CallRequest(base_url=f"{request.scheme}://{request.get_host()}")
            try:
                outcome = async_to_sync(call_tool)(catalog, principal, entry.name, arguments, call)
                result = render_outcome(outcome).model_dump(mode="json", by_alias=True, exclude_none=True)
            except UnknownTool:
                errors.append(
                    str(_("You may not use this tool (a scope, a permission or the client list stands in the way)."))
                )
            except TaskRequired:
                errors.append(str(_("This tool runs only as an MCP task, from a client that supports tasks.")))
    context = _context(
        model_admin,
        request,
        _("Try %(name)s") % {"name": entry.name},
        entry=entry,
        row=row,
        fields=form_fields(schema, submitted),
        errors=errors,
        writes=writes,
        result=json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False) if result is not None else None,
        is_error=bool(result and result.get("isError")),
        raw_arguments=request.POST.get("raw_arguments", "") if request.method == "POST" else "",
    )
    return TemplateResponse(request, "admin/mcp_expose/exposedtool/try.html", context)


class OverviewForm(forms.Form):
    user: forms.ModelChoiceField[Any] = forms.ModelChoiceField(queryset=None, required=False, label=_("User"))
    client: forms.ModelChoiceField[Any] = forms.ModelChoiceField(queryset=None, required=False, label=_("OAuth client"))
    scopes = forms.CharField(required=False, label=_("Scopes"), help_text=_("Space-separated. Blank: every scope."))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from oauth2_provider.models import get_application_model

        super().__init__(*args, **kwargs)
        cast("forms.ModelChoiceField[Any]", self.fields["user"]).queryset = get_user_model()._default_manager.order_by(
            "username"
        )
        cast("forms.ModelChoiceField[Any]", self.fields["client"]).queryset = get_application_model().objects.order_by(
            "name"
        )


def catalog_overview(model_admin: Any, request: HttpRequest) -> HttpResponse:
    catalog = provider.get_sync()
    form = OverviewForm(request.GET or None)
    rows = None
    if form.is_bound and form.is_valid():
        user = form.cleaned_data["user"]
        client = form.cleaned_data["client"]
        scope_text = form.cleaned_data["scopes"].strip()
        scopes = expand_scopes(scope_text.split()) if scope_text else _all_scopes(catalog)
        if user is None and client is not None:
            user = client.user
        from django.contrib.auth.models import AnonymousUser

        principal = principal_for_user(
            user or AnonymousUser(),
            scopes,
            "oauth" if client is not None else "api_key",
            client_id=client.client_id if client is not None else None,
        )
        upstream = [capability for capability in catalog.capabilities.values() if capability.kind == "upstream"]
        rows = explain([*provider.registry, *upstream], CatalogProvider._load_rows(), catalog, principal)
    context = _context(
        model_admin,
        request,
        _("Catalog overview"),
        form=form,
        rows=rows,
        lint=lint_catalog(catalog),
        problems=catalog.problems,
    )
    return TemplateResponse(request, "admin/mcp_expose/exposedtool/overview.html", context)


def preview_app(model_admin: Any, request: HttpRequest, object_id: int) -> HttpResponse:
    """The tool's MCP App page, rendered as a host would get it (whether or not its row switched it off)."""
    row = ExposedTool.objects.filter(pk=object_id).first()
    catalog = provider.get_sync()
    capability = catalog.capabilities.get(row.key) if row is not None else None
    app = capability.app if capability is not None else None
    if row is None or capability is None or app is None:
        raise Http404("This tool has no MCP App page.")
    users = [entry.name for entry in catalog.tools if entry.capability.app == app] or [
        served_name(capability.name, get_settings().WIRE_NAMES)
    ]
    html, error = "", ""
    try:
        html = render_app(app, users)
    except PageFailed as exc:
        error = str(exc)
    context = _context(
        model_admin,
        request,
        _("The page of %(name)s") % {"name": str(row)},
        row=row,
        app=app,
        html=html,
        size=len(html.encode()),
        error=error,
    )
    return TemplateResponse(request, "admin/mcp_expose/exposedtool/ui_preview.html", context)
