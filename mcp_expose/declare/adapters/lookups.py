"""The schema of a detail route's lookup argument, from what the view looks the object up by.

A DRF router matches the lookup with a regex (`[^/.]+`), which says only "text". The view then filters by
`lookup_field` on its model, so that field says what the value is: an integer primary key takes the integer
a list returned, and its digits as text, as `GET /books/1/` does.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import models

DIGITS = "^[0-9]+$"
SIGNED_DIGITS = "^-?[0-9]+$"


def lookup_schema(view_class: type, kwarg: str, route_schema: dict[str, Any]) -> dict[str, Any]:
    """`route_schema` (from the URL pattern) narrowed by the model field the view looks `kwarg` up by."""
    lookup_field = getattr(view_class, "lookup_field", None)
    if not lookup_field or (getattr(view_class, "lookup_url_kwarg", None) or lookup_field) != kwarg:
        return route_schema
    field = _model_field(view_class, lookup_field)
    if field is None:
        return route_schema
    pattern = route_schema.get("pattern")
    if isinstance(field, models.IntegerField | models.AutoField):
        return _integer(pattern, route_schema)
    if isinstance(field, models.UUIDField):
        return {**route_schema, "type": "string", "format": "uuid"}
    if isinstance(field, models.CharField) and "anyOf" not in route_schema:
        schema = {**route_schema, "type": "string", "minLength": 1}
        if field.max_length:
            schema["maxLength"] = field.max_length
        return schema
    return route_schema


def _integer(pattern: str | None, route_schema: dict[str, Any]) -> dict[str, Any]:
    """An integer, or its digits as text; negative only if the route matches a minus sign."""
    if "anyOf" in route_schema:  # <int:pk>: already integer or digits
        return route_schema
    negative = pattern is None or re.search(pattern, "-1") is not None
    digits_fit = pattern is None or all(re.search(pattern, text) for text in ("0", "7", "1234567890"))
    integer: dict[str, Any] = {"type": "integer"}
    if not negative:
        integer["minimum"] = 0
    text = {"type": "string", "pattern": (SIGNED_DIGITS if negative else DIGITS) if digits_fit else pattern}
    return {"anyOf": [integer, text]}


def _model_field(view_class: type, lookup_field: str) -> Any:
    """The model field behind `lookup_field` on the view's model (its queryset's, else its serializer's)."""
    model = getattr(getattr(view_class, "queryset", None), "model", None)
    if model is None:
        meta = getattr(getattr(view_class, "serializer_class", None), "Meta", None)
        model = getattr(meta, "model", None)
    if model is None or "__" in lookup_field:
        return None
    if lookup_field == "pk":
        return model._meta.pk
    try:
        field = model._meta.get_field(lookup_field)
    except Exception:  # noqa: BLE001  (FieldDoesNotExist: an annotation or property; keep the route's schema)
        return None
    if isinstance(field, models.ForeignKey):
        return field.target_field
    return field
