"""JSON Schema for what a view already declares: DRF serializer fields and Django form fields.

Nested serializers are inlined (no `$ref`); a serializer that nests itself is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from mcp_expose.core.errors import DeclarationError
from mcp_expose.declare.json_schemas import object_schema

MAX_NESTING = 10


# An upload, as an MCP argument: the file's bytes in base64, sent to the view as multipart/form-data.
FILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        # Written into the multipart part's headers: no control characters, quotes or path separators.
        "filename": {
            "type": "string",
            "minLength": 1,
            "maxLength": 255,
            "pattern": '^[^\\x00-\\x1f\\x7f"\\\\/]+$',
            "description": "The file's name.",
        },
        "content_base64": {"type": "string", "contentEncoding": "base64", "description": "The file's bytes, base64."},
        "content_type": {
            "type": "string",
            "maxLength": 255,
            "pattern": "^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$",
            "description": "Its media type, e.g. text/csv.",
        },
    },
    "required": ["filename", "content_base64"],
    "additionalProperties": False,
    "description": "A file to upload: its name and its bytes in base64.",
}


def serializer_input_schema(
    serializer: Any, *, partial: bool = False, origin: str, depth: int = 0, files: list[str] | None = None
) -> dict[str, Any]:
    """An object schema for the writable fields of a DRF serializer instance. With `files` (a list the
    top-level file fields' names are added to), file fields take `FILE_SCHEMA`; without, they are left out."""
    from rest_framework import serializers

    if depth > MAX_NESTING:
        raise DeclarationError(
            f"{origin}: serializers nest more than {MAX_NESTING} levels; a serializer that "
            "contains itself cannot be described without references."
        )
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, field in serializer.fields.items():
        if field.read_only or isinstance(field, serializers.HiddenField):
            continue
        if files is not None and isinstance(field, serializers.FileField):
            schema: dict[str, Any] | None = _file_schema(field)
            files.append(name)
        else:
            schema = drf_field_schema(field, origin=origin, depth=depth)
        if schema is None:
            continue
        properties[name] = schema
        if field.required and not partial:
            required.append(name)
    return object_schema(properties, required)


def _file_schema(field: Any) -> dict[str, Any]:
    schema = dict(FILE_SCHEMA)
    if getattr(field, "allow_null", False):
        return {"anyOf": [schema, {"type": "null"}]}
    if field.help_text:
        schema["description"] = str(field.help_text)
    return schema


def drf_field_schema(field: Any, *, origin: str, depth: int) -> dict[str, Any] | None:
    from rest_framework import fields, relations, serializers

    schema: dict[str, Any]
    if isinstance(field, serializers.ListSerializer):
        schema = {"type": "array", "items": serializer_input_schema(field.child, origin=origin, depth=depth + 1)}
    elif isinstance(field, serializers.BaseSerializer):
        schema = serializer_input_schema(field, origin=origin, depth=depth + 1)
    elif isinstance(field, relations.ManyRelatedField):
        child = drf_field_schema(field.child_relation, origin=origin, depth=depth)
        schema = {"type": "array", "items": child or {}}
    elif isinstance(field, relations.PrimaryKeyRelatedField):
        schema = {"type": ["integer", "string"], "description": "Primary key of the related object."}
    elif isinstance(field, relations.SlugRelatedField | relations.HyperlinkedRelatedField):
        schema = {"type": "string"}
    elif isinstance(field, fields.FileField):
        return None  # files do not travel in JSON arguments
    elif isinstance(field, fields.MultipleChoiceField):
        schema = {"type": "array", "items": {"enum": [str(key) for key in field.choices]}, "uniqueItems": True}
    elif isinstance(field, fields.ChoiceField):
        schema = {"enum": list(field.choices)}
    elif isinstance(field, fields.ListField):
        schema = {"type": "array", "items": drf_field_schema(field.child, origin=origin, depth=depth) or {}}
    elif isinstance(field, fields.DictField):
        schema = {
            "type": "object",
            "additionalProperties": drf_field_schema(field.child, origin=origin, depth=depth) or {},
        }
    else:
        schema = _scalar_schema(field, _drf_scalars())
    _bounds(schema, field)
    if getattr(field, "allow_null", False) and "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        schema["type"] = [*types, "null"]
    elif getattr(field, "allow_null", False) and "enum" in schema:
        schema["enum"] = [*schema["enum"], None]
    if field.help_text:
        schema["description"] = str(field.help_text)
    default = field.default
    if default is not fields.empty and not callable(default):
        schema["default"] = default
    return schema


def _bounds(schema: dict[str, Any], field: Any) -> None:
    """The field's lengths and bounds: an array's lengths count items (`maxItems`), a string's characters."""
    is_array = schema.get("type") == "array"
    lengths = (
        (("max_length", "maxItems"), ("min_length", "minItems"))
        if is_array
        else (("max_length", "maxLength"), ("min_length", "minLength"))
    )
    if is_array and getattr(field, "allow_empty", True) is False and getattr(field, "min_length", None) is None:
        schema["minItems"] = 1
    for attribute, keyword in (*lengths, ("max_value", "maximum"), ("min_value", "minimum")):
        value = getattr(field, attribute, None)
        if value is not None and not hasattr(value, "resolve"):
            schema[keyword] = (
                float(value) if keyword in ("maximum", "minimum") and not isinstance(value, int) else value
            )


def form_input_schema(form_class: Any, *, origin: str) -> dict[str, Any]:
    """An object schema for a Django form's fields."""
    form = form_class()
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, field in form.fields.items():
        schema = django_field_schema(field)
        if schema is None:
            continue
        properties[name] = schema
        if field.required:
            required.append(name)
    return object_schema(properties, required)


def django_field_schema(field: Any) -> dict[str, Any] | None:
    from django import forms

    schema: dict[str, Any]
    if isinstance(field, forms.FileField):
        return None
    if isinstance(field, forms.ModelMultipleChoiceField):
        schema = {"type": "array", "items": {"type": ["integer", "string"]}}
    elif isinstance(field, forms.ModelChoiceField):
        schema = {"type": ["integer", "string"], "description": "Primary key of the related object."}
    elif isinstance(field, forms.MultipleChoiceField):
        schema = {"type": "array", "items": {"enum": [str(key) for key, _ in _choices(field)]}}
    elif isinstance(field, forms.ChoiceField):
        schema = {"enum": [str(key) for key, _ in _choices(field) if key != ""]}
    else:
        schema = _scalar_schema(field, _form_scalars()) or {"type": "string"}
    _bounds(schema, field)
    if field.help_text:
        schema["description"] = str(field.help_text)
    elif field.label:
        schema["description"] = str(field.label)
    return schema


def _choices(field: Any) -> Iterable[tuple[Any, Any]]:
    """A form field's (value, label) pairs, as Django normalizes them when the field is built."""
    return cast("Iterable[tuple[Any, Any]]", field.choices)


def _scalar_schema(field: Any, table: list[tuple[type, dict[str, Any]]]) -> dict[str, Any]:
    """The schema of the first class in `table` that `field` is an instance of (order matters: subclasses first)."""
    for field_class, schema in table:
        if isinstance(field, field_class):
            return dict(schema)
    return {}


def _drf_scalars() -> list[tuple[type, dict[str, Any]]]:
    from rest_framework import fields

    return [
        (fields.BooleanField, {"type": "boolean"}),
        (fields.IntegerField, {"type": "integer"}),
        (fields.FloatField, {"type": "number"}),
        (fields.DecimalField, {"type": ["number", "string"], "description": "A decimal number."}),
        (fields.DateTimeField, {"type": "string", "format": "date-time"}),
        (fields.DateField, {"type": "string", "format": "date"}),
        (fields.TimeField, {"type": "string", "format": "time"}),
        (fields.UUIDField, {"type": "string", "format": "uuid"}),
        (fields.EmailField, {"type": "string", "format": "email"}),
        (fields.URLField, {"type": "string", "format": "uri"}),
        (fields.JSONField, {}),
        (fields.CharField, {"type": "string"}),
    ]


def _form_scalars() -> list[tuple[type, dict[str, Any]]]:
    from django import forms

    # DecimalField and FloatField subclass IntegerField: they come first.
    return [
        (forms.BooleanField, {"type": "boolean"}),
        (forms.DecimalField, {"type": ["number", "string"]}),
        (forms.FloatField, {"type": ["number", "string"]}),
        (forms.IntegerField, {"type": "integer"}),
        (forms.DateTimeField, {"type": "string", "format": "date-time"}),
        (forms.DateField, {"type": "string", "format": "date"}),
        (forms.EmailField, {"type": "string", "format": "email"}),
        (forms.URLField, {"type": "string", "format": "uri"}),
    ]
