"""Project a tool's return value into JSON that is safe to send.

`to_json_value` turns Python values into plain JSON values and refuses what
JSON cannot carry honestly: cycles, NaN and infinities, absurd nesting, and
mapping keys that become the same string (`{1: "a", "1": "b"}`), where one
value would silently replace the other.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import math
import uuid
from collections.abc import Mapping
from typing import Any

from django.utils.duration import duration_iso_string
from django.utils.functional import Promise
from pydantic import BaseModel

from mcp_expose.core.errors import McpExposeError

MAX_DEPTH = 128


class ProjectionError(McpExposeError):
    """The value cannot be sent as JSON. Its message is for the log, never for the client."""


def to_json_value(value: Any) -> Any:
    """A plain JSON value (dict, list, str, int, float, bool, None) equal in meaning to `value`."""
    return _project(value, 0, set())


def _project(value: Any, depth: int, path: set[int]) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int) and not isinstance(value, enum.Enum):
        return int(value)
    if isinstance(value, float) and not isinstance(value, enum.Enum):
        if not math.isfinite(value):
            raise ProjectionError(f"{value!r} is not a finite number and has no JSON form")
        return float(value)
    if depth >= MAX_DEPTH:
        raise ProjectionError(f"the result nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, enum.Enum):
        return _project(value.value, depth + 1, path)
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ProjectionError(f"{value!r} is not a finite number and has no JSON form")
        return str(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return duration_iso_string(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Promise):  # lazy translation strings
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        raise ProjectionError("bytes have no JSON form; return text, or base64-encode them yourself")
    if isinstance(value, BaseModel):
        return _project(value.model_dump(mode="json"), depth + 1, path)
    marker = id(value)
    if marker in path:
        raise ProjectionError("the result contains a reference cycle")
    path.add(marker)
    try:
        return _project_container(value, depth, path)
    finally:
        path.discard(marker)


def _project_container(value: Any, depth: int, path: set[int]) -> Any:
    from django.db.models import Model, QuerySet

    if isinstance(value, Mapping):
        return _project_mapping(value, depth, path)
    if isinstance(value, list | tuple):
        return [_project(item, depth + 1, path) for item in value]
    if isinstance(value, set | frozenset):
        items = [_project(item, depth + 1, path) for item in value]
        try:
            return sorted(items)
        except TypeError:
            return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
        return _project(fields, depth + 1, path)
    if isinstance(value, Model):
        return _project(model_fields(value), depth + 1, path)
    if isinstance(value, QuerySet):
        # Evaluates the queryset: fine inside the sync hop, refused by Django on the event loop.
        return [_project(item, depth + 1, path) for item in value]
    raise ProjectionError(f"values of type {type(value).__qualname__} have no JSON form")


def _project_mapping(value: Mapping[Any, Any], depth: int, path: set[int]) -> dict[str, Any]:
    projected: dict[str, Any] = {}
    for key, item in value.items():
        name = _key(key)
        if name in projected:
            # Names the key, never a value: the message is logged.
            raise ProjectionError(f"two mapping keys become the same JSON key {_shown(name)}")
        projected[name] = _project(item, depth + 1, path)
    return projected


def _shown(name: str, limit: int = 60) -> str:
    return json.dumps(name if len(name) <= limit else name[:limit] + "...")


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, enum.Enum):
        return _key(key.value)  # as its value is projected
    if isinstance(key, bool | int | uuid.UUID | decimal.Decimal) or key is None:
        return json.dumps(key) if isinstance(key, bool) or key is None else str(key)
    raise ProjectionError(f"mapping keys of type {type(key).__qualname__} have no JSON form")


def model_fields(instance: Any) -> dict[str, Any]:
    """A model instance's concrete fields, relations as primary keys. Needs no query."""
    from django.db.models.fields.files import FieldFile

    data: dict[str, Any] = {}
    for field in instance._meta.concrete_fields:
        value = field.value_from_object(instance)
        data[field.name] = (value.name or None) if isinstance(value, FieldFile) else value
    return data


def structured(value: Any) -> dict[str, Any]:
    """`structuredContent`: objects as they are, anything else under "result"."""
    return value if isinstance(value, dict) else {"result": value}


def compact_json(value: Any) -> str:
    """The text block: the same JSON, compact, keys sorted, so it reads the same every time."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class ResultTooLarge(McpExposeError):
    """A result over its tool's size limit: answered as `result_too_large`, never cut.

    A cut result is a wrong answer the model may trust: a page cut short loses the items its next cursor skips, a
    list cut short has no way to the rest, and a prefix of JSON is no JSON. The error names the limit, so the model
    can ask for less (a filter, a smaller page), and the operator can raise it."""

    def __init__(self, size: int, limit: int, what: str = "result") -> None:
        super().__init__(f"the {what} is {size} bytes; the limit is {limit}")
        self.size = size
        self.limit = limit
        self.what = what


def json_size(value: Any) -> int:
    return len(compact_json(value).encode())
