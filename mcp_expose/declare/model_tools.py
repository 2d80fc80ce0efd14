"""`ModelTools`: list/get/create/update/delete tools for a model, on DRF model serializers.

Filtering and ordering take only what the declaration allow-lists; everything
else is refused by the closed schema, naming what is allowed. Lists are capped
and paged by signed cursors. The caller's Django model permissions decide who
sees which tool; writes run in a transaction, so a failed one leaves nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import IntegrityError, models

from mcp_expose.core.errors import Conflict, DeclarationError, InvalidInput
from mcp_expose.declare.adapters.cursors import CURSOR_MAX_LENGTH, cursor_for_values, read_cursor
from mcp_expose.declare.adapters.field_schema import serializer_input_schema
from mcp_expose.declare.adapters.http import field_errors
from mcp_expose.declare.apps import AppDeclaration, app_field
from mcp_expose.declare.json_schemas import capped_parameters, object_schema
from mcp_expose.declare.registry import (
    Annotations,
    Capability,
    CapabilityRegistry,
    ConfirmationDeclaration,
    TaskSupport,
    confirmation_fields,
    string_set,
    tag_set,
    task_fields,
)
from mcp_expose.declare.registry import registry as default_registry
from mcp_expose.declare.schema import LazySignature, generated_signature

ACTIONS = ("list", "get", "create", "update", "delete")
READ_ACTIONS = frozenset({"list", "get"})
SAFE_LOOKUPS = frozenset(
    {
        "exact",
        "iexact",
        "contains",
        "icontains",
        "startswith",
        "istartswith",
        "endswith",
        "iendswith",
        "gt",
        "gte",
        "lt",
        "lte",
        "in",
        "isnull",
        "date",
        "year",
    }
)
PERMISSION_FOR = {"list": "view", "get": "view", "create": "add", "update": "change", "delete": "delete"}


class ModelTools:
    """Declare tools for `model`. Keep the instance or not: declaring registers the tools.

    `fields`: the serializer's fields ("__all__" or a list); `read_only_fields` are shown, never written.
    `filters`: {"field" or "relation__field": ["exact", "icontains", ...]} (no regex lookups).
    `ordering`: fields a caller may order by (each also descending). `page_size`/`max_page_size` bound lists.
    Deletes are destructive and need a person's confirmation unless `confirm_deletes=False`;
    `confirm_deletes="approval_page"` takes it only on the site's approval page.
    Scopes: `read_scopes` for list/get and `write_scopes` for create/update/delete, so that a token granted
    reading cannot write; `scopes` instead applies to every action (one or the other, not both).
    `tasks`: action → "optional" or "required", to run those calls as MCP tasks (a long list or a bulk update).
    `apps`: action → `mcp_expose.App(...)` or a template name, to show those results as MCP Apps.
    """

    def __init__(
        self,
        model: type[models.Model],
        *,
        actions: Iterable[str] = ("list", "get"),
        fields: str | Iterable[str] = "__all__",
        read_only_fields: Iterable[str] = (),
        filters: Mapping[str, Iterable[str]] | None = None,
        ordering: Iterable[str] = (),
        page_size: int = 20,
        max_page_size: int = 100,
        prefix: str | None = None,
        scopes: Iterable[str] | None = None,
        read_scopes: Iterable[str] | None = None,
        write_scopes: Iterable[str] | None = None,
        confirm_deletes: ConfirmationDeclaration = True,
        enabled: bool = True,
        rate_limit: str = "",
        tasks: Mapping[str, TaskSupport] | None = None,
        apps: Mapping[str, AppDeclaration] | None = None,
        tags: Iterable[str] = (),
        registry: CapabilityRegistry | None = None,
    ) -> None:
        self.model = model
        self.origin = f"ModelTools({model._meta.label})"
        self.tags = tag_set(tags, self.origin)
        self.actions = tuple(actions)
        unknown = sorted(set(self.actions) - set(ACTIONS))
        if unknown:
            raise DeclarationError(f"{self.origin}: unknown actions {unknown}; choose from {list(ACTIONS)}.")
        if not 1 <= page_size <= max_page_size:
            raise DeclarationError(f"{self.origin}: page_size must be between 1 and max_page_size.")
        self.fields = fields if isinstance(fields, str) else list(fields)
        self.read_only_fields = list(read_only_fields)
        self.filters = {path: sorted(set(lookups)) for path, lookups in (filters or {}).items()}
        self.ordering = list(ordering)
        self.page_size = page_size
        self.max_page_size = max_page_size
        self._check_declaration()
        scopes_for = self._scopes_by_action(scopes, read_scopes, write_scopes)
        self.serializer_class = self._serializer_class()
        meta = model._meta
        prefix = prefix or f"{meta.app_label}.{str(meta.verbose_name_plural).replace(' ', '_')}"
        target_registry = registry if registry is not None else default_registry
        delete_confirmation = confirmation_fields(confirm_deletes, self.origin)
        self.tasks = dict(tasks or {})
        if unknown_tasks := sorted(set(self.tasks) - set(self.actions)):
            raise DeclarationError(f"{self.origin}: tasks= names actions not declared: {unknown_tasks}.")
        self.apps = dict(apps or {})
        if unknown_apps := sorted(set(self.apps) - set(self.actions)):
            raise DeclarationError(f"{self.origin}: apps= names actions not declared: {unknown_apps}.")
        self.capabilities = [
            target_registry.register(
                self._capability(
                    action, f"{prefix}.{action}", scopes_for[action], delete_confirmation, enabled, rate_limit
                )
            )
            for action in self.actions
        ]

    # Declaration ---------------------------------------------------------------------------------------------

    def _check_declaration(self) -> None:
        for path, lookups in self.filters.items():
            self._model_field(path)
            bad = sorted(set(lookups) - SAFE_LOOKUPS)
            if bad:
                raise DeclarationError(
                    f"{self.origin}: lookups {bad} on {path!r} are not allowed; use {sorted(SAFE_LOOKUPS)}."
                )
        for name in self.ordering:
            self._model_field(name)

    def _scopes_by_action(
        self, scopes: Iterable[str] | None, read_scopes: Iterable[str] | None, write_scopes: Iterable[str] | None
    ) -> dict[str, frozenset[str]]:
        if scopes is not None and (read_scopes is not None or write_scopes is not None):
            raise DeclarationError(
                f"{self.origin}: scopes= applies to every action; give it alone, or read_scopes= and write_scopes= "
                "instead."
            )
        writes = [action for action in self.actions if action not in READ_ACTIONS]
        if read_scopes is not None and write_scopes is None and writes:
            raise DeclarationError(
                f"{self.origin}: read_scopes= is given but write_scopes= is not, which would leave {writes} "
                "needing no scope at all; give write_scopes= too."
            )
        for what, given in (("scopes", scopes), ("read_scopes", read_scopes), ("write_scopes", write_scopes)):
            string_set(given or (), what, self.origin)  # a single string is refused, saying so
        reading = frozenset(scopes if scopes is not None else read_scopes or ())
        writing = frozenset(scopes if scopes is not None else write_scopes or ())
        return {action: reading if action in READ_ACTIONS else writing for action in self.actions}

    def _model_field(self, path: str) -> models.Field:
        model: Any = self.model
        field: Any = None
        for part in path.split("__"):
            try:
                field = model._meta.get_field(part)
            except (FieldDoesNotExist, AttributeError):
                raise DeclarationError(
                    f"{self.origin}: {path!r} is not a field path of {self.model._meta.label}."
                ) from None
            model = field.related_model
        return field

    def _serializer_class(self) -> type:
        from rest_framework import serializers

        meta = type("Meta", (), {"model": self.model, "fields": self.fields, "read_only_fields": self.read_only_fields})
        return type(f"{self.model.__name__}ToolSerializer", (serializers.ModelSerializer,), {"Meta": meta})

    def _capability(
        self,
        action: str,
        key: str,
        scopes: frozenset[str],
        delete_confirmation: dict[str, Any],
        enabled: bool,
        rate_limit: str,
    ) -> Capability:
        meta = self.model._meta
        read_only = action in READ_ACTIONS
        annotations = Annotations(
            read_only=read_only,
            destructive=True if action == "delete" else (False if not read_only else None),
            idempotent=True if action in ("get", "list", "update", "delete") else False,
            open_world=False,
        )
        return Capability(
            key=key,
            name=key,
            kind="model",
            target=getattr(self, f"_{action}"),
            source=LazySignature(lambda: generated_signature(self._schema(action))),
            origin=f"{self.origin}.{action}",
            description=self._description(action),
            permissions=frozenset({f"{meta.app_label}.{PERMISSION_FOR[action]}_{meta.model_name}"}),
            scopes=scopes,
            annotations=annotations,
            enabled_by_default=enabled,
            **(delete_confirmation if action == "delete" else confirmation_fields(False, self.origin)),
            rate_limit=rate_limit,
            call_style="mapping",
            **task_fields(self.tasks.get(action), False, f"{self.origin}.{action}"),
            **app_field(self.apps.get(action), f"{self.origin}.{action}"),
            tags=self.tags,
        )

    def _description(self, action: str) -> str:
        meta = self.model._meta
        plural, singular = meta.verbose_name_plural, meta.verbose_name
        return {
            "list": f"List {plural}, filtered and ordered by the allowed fields, {self.page_size} per page "
            f"(at most {self.max_page_size}).",
            "get": f"Get one {singular} by its id.",
            "create": f"Create one {singular}.",
            "update": f"Change some fields of one {singular}.",
            "delete": f"Delete one {singular}. This cannot be undone.",
        }[action]

    def _pk_schema(self) -> dict[str, Any]:
        pk = self.model._meta.pk
        integer = isinstance(pk, models.AutoField | models.BigAutoField | models.IntegerField)
        return {"type": "integer" if integer else "string", "description": f"The {self.model._meta.verbose_name}'s id."}

    def _schema(self, action: str) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        required: list[str] = []
        if action in ("get", "update", "delete"):
            properties["id"] = self._pk_schema()
            required.append("id")
        if action == "list":
            properties.update(capped_parameters(self._list_properties()))
        if action in ("create", "update"):
            writable = serializer_input_schema(self.serializer_class(), partial=action == "update", origin=self.origin)
            for name, schema in writable["properties"].items():
                if name in properties:
                    raise DeclarationError(f"{self.origin}: the field {name!r} clashes with the 'id' argument.")
                properties[name] = schema
            required.extend(writable.get("required", []))
        return object_schema(properties, required)

    def _list_properties(self) -> dict[str, Any]:
        filter_properties = {}
        for path, lookups in self.filters.items():
            base = _field_schema(self._model_field(path))
            for lookup in lookups:
                key = path if lookup == "exact" else f"{path}__{lookup}"
                if lookup == "in":
                    filter_properties[key] = {"type": "array", "items": base, "maxItems": 100}
                elif lookup == "isnull":
                    filter_properties[key] = {"type": "boolean"}
                elif lookup in ("year",):
                    filter_properties[key] = {"type": "integer"}
                elif lookup == "date":
                    filter_properties[key] = {"type": "string", "format": "date"}
                else:
                    filter_properties[key] = dict(base)
        properties: dict[str, Any] = {
            "filters": {
                "type": "object",
                "properties": filter_properties,
                "additionalProperties": False,
                "description": "Only these field lookups may be used: "
                + (", ".join(filter_properties) or "none")
                + ".",
            },
            "page_size": {"type": "integer", "minimum": 1, "maximum": self.max_page_size, "default": self.page_size},
            "cursor": {
                "type": "string",
                "maxLength": CURSOR_MAX_LENGTH,
                "description": "The next_cursor of a previous result, to get the next page.",
            },
        }
        if self.ordering:
            properties["order_by"] = {"enum": [value for name in self.ordering for value in (name, f"-{name}")]}
        return properties

    # Calls (sync, inside the invocation hop) -------------------------------------------------------------------

    def _list(self, arguments: Mapping[str, Any], context: Any) -> dict[str, Any]:
        filters = dict(arguments.get("filters") or {})
        order_by = arguments.get("order_by")
        digest = hashlib.sha256(json.dumps([filters, order_by], sort_keys=True, default=str).encode()).hexdigest()[:16]
        scope = f"{self.model._meta.label}:list"
        offset = 0
        if arguments.get("cursor"):
            position = read_cursor(arguments["cursor"], scope)
            if not isinstance(position, dict) or position.get("d") != digest:
                raise InvalidInput(
                    "The cursor belongs to a different query.",
                    details=[
                        {
                            "path": "$.cursor",
                            "message": "Use the same filters and order_by as the call that returned it.",
                        }
                    ],
                )
            offset = int(position.get("o", 0))
        size = min(int(arguments.get("page_size") or self.page_size), self.max_page_size)
        ordering = ([order_by] if order_by else list(self.model._meta.ordering or [])) + ["pk"]
        queryset = self.model._default_manager.filter(**filters).order_by(*ordering)
        rows = list(queryset[offset : offset + size + 1])
        more = len(rows) > size
        return {
            "results": self.serializer_class(rows[:size], many=True).data,
            "next_cursor": cursor_for_values({"o": offset + size, "d": digest}, scope) if more else None,
        }

    def _object(self, arguments: Mapping[str, Any]) -> models.Model:
        return self.model._default_manager.get(pk=arguments["id"])

    def _get(self, arguments: Mapping[str, Any], context: Any) -> Any:
        return self.serializer_class(self._object(arguments)).data

    def _save(self, serializer: Any) -> Any:
        if not serializer.is_valid():
            raise InvalidInput("The values are not valid.", details=field_errors(serializer.errors))
        try:
            serializer.save()
        except IntegrityError as exc:
            raise Conflict("The change conflicts with existing data.") from exc
        return serializer.data

    def _create(self, arguments: Mapping[str, Any], context: Any) -> Any:
        return self._save(self.serializer_class(data=dict(arguments)))

    def _update(self, arguments: Mapping[str, Any], context: Any) -> Any:
        values = {key: value for key, value in arguments.items() if key != "id"}
        return self._save(self.serializer_class(self._object(arguments), data=values, partial=True))

    def _delete(self, arguments: Mapping[str, Any], context: Any) -> dict[str, Any]:
        instance = self._object(arguments)
        try:
            instance.delete()
        except models.ProtectedError as exc:
            raise Conflict(f"This {self.model._meta.verbose_name} is still referenced and cannot be deleted.") from exc
        return {"deleted": arguments["id"]}


def _field_schema(field: Any) -> dict[str, Any]:
    if field.is_relation:
        return {"type": ["integer", "string"]}
    if isinstance(field, models.BooleanField):
        return {"type": "boolean"}
    if isinstance(field, models.IntegerField | models.AutoField):
        return {"type": "integer"}
    if isinstance(field, models.DecimalField | models.FloatField):
        return {"type": ["number", "string"]}
    if isinstance(field, models.DateTimeField):
        return {"type": "string", "format": "date-time"}
    if isinstance(field, models.DateField):
        return {"type": "string", "format": "date"}
    if field.choices:
        return {"enum": [str(value) for value, _ in field.flatchoices]}
    return {"type": "string"}
