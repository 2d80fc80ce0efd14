"""Shaping JSON schemas as we serve them: references inlined, one type per branch, objects closed, strings capped.

Pure functions over plain dicts, shared by every adapter, so every schema a client sees follows the same rules."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from mcp_expose.core.conf import get_settings
from mcp_expose.core.errors import DeclarationError

MAX_SCHEMA_DEPTH = 64
_NUMBER_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})

# The keywords that constrain only values of one type: a type array's branch of that type takes them along.
TYPE_KEYWORDS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "string": frozenset("minLength maxLength pattern format contentEncoding contentMediaType".split()),
        "number": _NUMBER_KEYWORDS,
        "integer": _NUMBER_KEYWORDS,
        "array": frozenset(
            "items prefixItems contains minContains maxContains minItems maxItems uniqueItems unevaluatedItems".split()
        ),
        "object": frozenset(
            "properties patternProperties additionalProperties propertyNames required minProperties maxProperties "
            "dependentRequired dependentSchemas unevaluatedProperties".split()
        ),
    }
)


def inline_refs(schema: dict[str, Any], *, origin: str) -> dict[str, Any]:
    """Replace every local `$ref` with the definition it points to.

    A recursive type cannot be inlined; it is refused with advice instead.
    """
    definitions = schema.get("$defs", {})

    def resolve(node: Any, stack: tuple[str, ...]) -> Any:
        if len(stack) > MAX_SCHEMA_DEPTH:
            raise DeclarationError(f"{origin}: its schema nests more than {MAX_SCHEMA_DEPTH} levels of types.")
        if isinstance(node, list):
            return [resolve(item, stack) for item in node]
        if not isinstance(node, dict):
            return node
        node = {key: value for key, value in node.items() if key != "$defs"}
        all_of = node.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict) and "$ref" in all_of[0]:
            node.pop("allOf")
            node = {**all_of[0], **node}
        if "$ref" in node:
            ref = node.pop("$ref")
            name = ref.rsplit("/", 1)[-1]
            if not ref.startswith("#/$defs/") or name not in definitions:
                raise DeclarationError(f"{origin}: its schema refers to {ref!r}, which cannot be inlined.")
            if name in stack:
                raise DeclarationError(
                    f"{origin}: type {name!r} refers to itself, and a recursive type cannot be inlined into a "
                    "reference-free schema. Use a flat shape instead, for example a list of items that name "
                    "their parent by id, or accept the nested part as `dict[str, Any]`."
                )
            target = resolve(copy.deepcopy(definitions[name]), (*stack, name))
            target.pop("title", None)
            node = {**target, **node}
        if "const" in node and "enum" not in node:
            node["enum"] = [node.pop("const")]
        return {key: resolve(value, stack) for key, value in node.items()}

    return resolve(schema, ())


# Keywords whose values are data, not schemas; and those whose values map names to schemas.
DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


SCHEMA_MAP_KEYWORDS = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})


def portable_types(schema: Any) -> Any:
    """`schema` with every `"type": [a, b, ...]` written as `anyOf` branches of one `type` each.

    A type array is valid JSON Schema, but hosts that map tool schemas onto a single-`type` dialect (the
    OpenAPI subset of some model providers' function declarations) reject the tool or drop the constraint.
    Each branch takes the keywords that constrain its own type (a `maxLength` goes to the string branch);
    the rest (description, enum, default) stay around the union, so exactly the same values validate.
    """
    if isinstance(schema, list):
        return [portable_types(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    node: dict[str, Any] = {}
    for key, value in schema.items():
        if key in DATA_KEYWORDS:
            node[key] = value
        elif key in SCHEMA_MAP_KEYWORDS and isinstance(value, dict):
            node[key] = {name: portable_types(item) for name, item in value.items()}
        else:
            node[key] = portable_types(value)
    types = node.get("type")
    if not isinstance(types, list) or not all(isinstance(kind, str) for kind in types):
        return node
    del node["type"]
    if len(types) == 1:
        return {"type": types[0], **node}
    moved = {keyword for kind in types for keyword in TYPE_KEYWORDS.get(kind, ()) if keyword in node}
    branches = [
        {"type": kind, **{keyword: node[keyword] for keyword in TYPE_KEYWORDS.get(kind, ()) if keyword in node}}
        for kind in types
    ]
    rest = {key: value for key, value in node.items() if key not in moved}
    if "anyOf" in rest:  # a union already there must hold as well
        return {**rest, "allOf": [*rest.get("allOf", []), {"anyOf": branches}]}
    return {"anyOf": branches, **rest}


def object_schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """A closed object schema: these properties and no others, `required` only when some are."""
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


def close_object(schema: dict[str, Any]) -> dict[str, Any]:
    """The root of an input schema: an object with no keys beyond its properties."""
    schema.pop("title", None)
    schema["type"] = "object"
    schema.setdefault("properties", {})
    if not schema.get("required"):
        schema.pop("required", None)
    schema["additionalProperties"] = False
    return schema


def bounded(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` closed at every depth (`closed`) with every unbounded string capped (`capped`): what a
    function tool's parameters, a filter, a search or a URL part gets."""
    return capped(closed(schema))


def closed(schema: dict[str, Any]) -> dict[str, Any]:
    """Close every object schema that lists its properties, so an unknown nested key is refused, not dropped.

    Objects that say what else they take (`dict[str, X]`, a serializer's `DictField`, a model with
    `extra="allow"`) and schemas that accept anything (`Any`, `JSONField`) are left as they are.
    """
    for node in _subschemas(schema):
        if "properties" in node and "additionalProperties" not in node and "patternProperties" not in node:
            node["additionalProperties"] = False
    return schema


def capped(schema: dict[str, Any]) -> dict[str, Any]:
    """Cap every string without a declared bound at `MAX_STRING_LENGTH` (read when the schema is built).

    Not for the body fields of a view or model: those accept over MCP what they accept over HTTP (a
    `TextField` has no bound there), within the request body limit. Enums are bounded already.
    """
    limit = get_settings().MAX_STRING_LENGTH
    if limit is None:
        return schema
    for node in _subschemas(schema):
        types = node.get("type")
        is_string = types == "string" or (isinstance(types, list) and "string" in types)
        if is_string and not {"maxLength", "enum", "const"} & set(node):
            node["maxLength"] = limit
    return schema


def capped_parameters(parameters: dict[str, Any]) -> dict[str, Any]:
    """`capped` for each schema of a name-to-schema mapping (URL keywords, query parameters, filters)."""
    for schema in parameters.values():
        capped(schema)
    return parameters


def untitled(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` without the titles generators derive from names (pydantic's "Title" for `title`): they cost
    tokens and say nothing. A property named "title" stays."""
    for node in _subschemas(schema):
        if isinstance(node.get("title"), str):
            del node["title"]
    return schema


def optional_everywhere(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with no property required at any depth: for answers that may leave fields out."""
    for node in _subschemas(schema):
        if isinstance(node.get("required"), list):
            del node["required"]
    return schema


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs")


_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


_SCHEMA_VALUES = ("items", "additionalProperties", "contains", "not", "if", "then", "else")


def _subschemas(node: Any) -> Iterator[dict[str, Any]]:
    """`node` and every schema inside it, by keyword: a property named "properties" is not taken for one."""
    if not isinstance(node, dict):
        return
    yield node
    for keyword in _SCHEMA_MAPS:
        for child in (node.get(keyword) or {}).values():
            yield from _subschemas(child)
    for keyword in _SCHEMA_LISTS:
        for child in node.get(keyword) or ():
            yield from _subschemas(child)
    for keyword in _SCHEMA_VALUES:
        yield from _subschemas(node.get(keyword))


def freeze(value: Any) -> Any:
    """A read-only view of a JSON-like structure, so compiled schemas cannot be mutated."""
    if isinstance(value, dict):
        return MappingProxyType({key: freeze(item) for key, item in value.items()})
    if isinstance(value, list):
        return tuple(freeze(item) for item in value)
    return value


def thaw(value: Any) -> Any:
    """A plain, mutable copy of a frozen structure, for serialisers that need dicts and lists."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [thaw(item) for item in value]
    return value
