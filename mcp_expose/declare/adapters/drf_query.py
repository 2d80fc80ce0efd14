"""The query parameters a DRF list view reads, as schema: its filter backends' (django-filter's FilterSets
included), its ordering fields, its paginator's."""

from __future__ import annotations

import logging
import re
from typing import Any

logger = logging.getLogger("mcp_expose.views")


def filterset_parameters(backend: Any, view: Any) -> dict[str, Any] | None:
    """django-filter's FilterSet fields (django-filter no longer describes them for DRF schemas itself)."""
    if not hasattr(backend, "get_filterset_class"):
        return None
    from mcp_expose.declare.adapters.field_schema import django_field_schema

    queryset = getattr(view, "queryset", None)
    if queryset is None:
        try:
            queryset = view.get_queryset()
        except Exception:  # noqa: BLE001  (a queryset that needs a request)
            return {}
    filterset_class = backend.get_filterset_class(view, queryset)
    if filterset_class is None:
        return {}
    parameters = {}
    for name, declared in filterset_class.base_filters.items():
        schema = django_field_schema(declared.field)
        if schema is not None:
            parameters[name] = schema
    return parameters


def component_parameters(component: Any, view: Any) -> dict[str, Any]:
    from_filterset = filterset_parameters(component, view)
    if from_filterset is not None:
        return from_filterset
    try:
        parameters = component.get_schema_operation_parameters(view)
    except Exception:  # noqa: BLE001  (django-filter may need a queryset that depends on the request)
        logger.warning("Could not read the query parameters of %s", type(component).__name__, exc_info=True)
        return {}
    result = {}
    for parameter in parameters:
        if parameter.get("in", "query") != "query":
            continue
        schema = dict(parameter.get("schema") or {"type": "string"})
        if parameter.get("description"):
            schema["description"] = str(parameter["description"])
        result[str(parameter["name"])] = schema
    return result


def describe_ordering(view: Any, query: dict[str, Any]) -> None:
    """OrderingFilter's parameter says only 'string'; name the fields the view allows."""
    from rest_framework.filters import OrderingFilter

    for backend_class in getattr(view, "filter_backends", []):
        if issubclass(backend_class, OrderingFilter):
            backend = backend_class()
            queryset = getattr(view, "queryset", None)
            try:
                fields = [name for name, _ in backend.get_valid_fields(queryset, view, {"request": None})]
            except Exception:  # noqa: BLE001
                continue
            if fields and backend.ordering_param in query:
                query[backend.ordering_param].update(ordering_schema(fields))


def ordering_schema(fields: list[str]) -> dict[str, Any]:
    """OrderingFilter takes a comma-separated list of the allowed fields, each maybe preceded by "-":
    "-price,created" sorts by both. Fields outside the list, which HTTP drops without a word, are refused."""
    one = "-?(?:" + "|".join(re.escape(name) for name in fields) + ")"
    return {
        "type": "string",
        "pattern": rf"^\s*{one}\s*(?:,\s*{one}\s*)*$",
        "maxLength": sum(len(name) + 2 for name in fields),
        "description": 'Sort by these fields, comma-separated; "-" before one sorts it descending. Allowed: '
        + ", ".join(fields)
        + ".",
    }
