"""A Django Ninja operation's tool schemas, as Ninja's OpenAPI generator describes the operation.

Ninja already describes each operation to HTTP clients: its path, query, header and cookie parameters (a
`Query[Schema]` flattened into its fields), its body (the schema itself when there is one, JSON, form or
multipart) and each response's schema. That description is the contract HTTP clients rely on, so it is the source
here too, made for one operation at a time (see `_described`). The arguments are flattened as the DRF adapter flattens a view's: the path parameters, then the query
parameters, headers and cookies, then the body's fields. A path parameter that shares a name with another
argument is renamed `url_<name>`, as for DRF views. References are inlined and objects closed at every depth.

The output schema is served only where Ninja enforces it: one 2xx response with a schema (Ninja validates the
result against it). A result that is not an object is served under "result", as structured content carries it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from mcp_expose.core.errors import DeclarationError
from mcp_expose.declare.adapters.field_schema import FILE_SCHEMA
from mcp_expose.declare.adapters.ninja_api import NinjaOperation
from mcp_expose.declare.json_schemas import (
    capped,
    closed,
    freeze,
    inline_refs,
    object_schema,
    optional_everywhere,
    untitled,
)
from mcp_expose.declare.schema import SchemaSignature

COMPONENTS = "#/components/schemas/"
# How each body media type Ninja declares travels in the request the operation gets.
ENCODINGS = MappingProxyType(
    {"application/json": "json", "application/x-www-form-urlencoded": "form", "multipart/form-data": "multipart"}
)
PARAMETER_SOURCES = ("path", "query", "header", "cookie")


@dataclass(frozen=True)
class NinjaRouting:
    """Where each argument of one operation goes in the request: by source, argument → the name Ninja reads."""

    sources: Mapping[str, Mapping[str, str]]  # "path", "query", "header", "cookie", "body" → {argument: name}
    files: frozenset[str] = frozenset()  # body fields that are uploads
    encoding: str = "json"  # how the body travels: "json", "form" or "multipart"
    has_body: bool = False

    def of(self, source: str) -> Mapping[str, str]:
        return self.sources.get(source, MappingProxyType({}))


class NinjaSignature(SchemaSignature):
    """The operation's input schema, with where each argument goes, and the output schema Ninja enforces."""

    def __init__(
        self, input_schema: dict[str, Any], routing: NinjaRouting, output_schema: dict[str, Any] | None
    ) -> None:
        super().__init__(input_schema)
        self.routing = routing
        self.output_schema = freeze(output_schema) if output_schema is not None else None


@dataclass
class _Arguments:
    properties: dict[str, Any] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    sources: dict[str, dict[str, str]] = field(default_factory=dict)

    def add(self, source: str, argument: str, name: str, schema: Any, required: bool, origin: str) -> None:
        if argument in self.properties:
            raise DeclarationError(
                f"{origin}: the {source} parameter {name!r} has the same name as another argument; rename one."
            )
        self.properties[argument] = schema
        self.sources.setdefault(source, {})[argument] = name
        if required:
            self.required.append(argument)


def build_signature(operation: NinjaOperation, origin: str) -> NinjaSignature:
    """The signature of `operation`, from Ninja's description of it."""
    details, definitions, output_definitions = _described(operation)
    arguments = _Arguments()
    parameters = [parameter for parameter in details.get("parameters", []) if parameter.get("in") in PARAMETER_SOURCES]
    body, encoding, body_required = _body(details, definitions, origin)
    taken = {parameter["name"] for parameter in parameters if parameter["in"] != "path"} | set(body["properties"])
    for parameter in sorted(parameters, key=lambda p: PARAMETER_SOURCES.index(p["in"])):
        source, name = parameter["in"], parameter["name"]
        schema = _resolved(parameter.get("schema", {}), definitions, origin)
        if parameter.get("description") and "description" not in schema:
            schema["description"] = parameter["description"]
        argument = name
        if source == "path":
            schema.setdefault("description", f"The {name} in the URL.")
            if schema.get("type") == "string" and "pattern" not in schema and not _takes_slashes(operation, name):
                schema["pattern"] = "^[^/]+$"  # one URL segment, as Django's default converter matches
            if name in taken:
                argument = f"url_{name}"
        arguments.add(
            source, argument, name, capped(schema), source == "path" or bool(parameter.get("required")), origin
        )
    files = []
    for name, schema in body["properties"].items():
        upload = _upload(schema)
        if upload is not None:
            files.append(name)
        arguments.add(
            "body",
            name,
            name,
            upload if upload is not None else schema,
            body_required and name in body.get("required", []),
            origin,
        )
    routing = NinjaRouting(
        sources=MappingProxyType({source: MappingProxyType(names) for source, names in arguments.sources.items()}),
        files=frozenset(files),
        encoding=encoding,
        has_body=bool(details.get("requestBody")),
    )
    output = _output_schema(operation, details, output_definitions, origin)
    return NinjaSignature(object_schema(arguments.properties, arguments.required), routing, output)


def _takes_slashes(operation: NinjaOperation, name: str) -> bool:
    """Whether the route's converter for `name` matches "/" (`{path:name}`), as the default one does not."""
    return re.search(r"{path:" + re.escape(name) + "}", str(operation.bound.path)) is not None


def _described(operation: NinjaOperation) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """What Ninja's OpenAPI generator says of this one operation: its parameters, body and responses, with the
    definitions each refers to. Each is generated on its own: a whole document keeps one definition per model
    name, so two models of one name in different operations would meet there."""
    from ninja.openapi.schema import OpenAPISchema

    class OneOperation(OpenAPISchema):
        def __init__(self, api: Any) -> None:  # the attributes the per-operation methods use, nothing else
            dict.__init__(self)
            self.api, self.path_prefix, self.schemas, self.securitySchemes = api, "", {}, {}
            self.all_operation_ids: set[str] = set()

    inputs, outputs = OneOperation(operation.api), OneOperation(operation.api)
    details = {
        "parameters": inputs.operation_parameters(operation.bound),
        "requestBody": inputs.request_body(operation.bound),
        "responses": outputs.responses(operation.bound),
    }
    return details, inputs.schemas, outputs.schemas


def _body(details: Mapping[str, Any], definitions: Mapping[str, Any], origin: str) -> tuple[dict[str, Any], str, bool]:
    request_body = details.get("requestBody")
    if not request_body:
        return {"properties": {}}, "json", False
    content = request_body.get("content", {})
    media_type = next(iter(content), "")
    encoding = ENCODINGS.get(media_type)
    if encoding is None:
        raise DeclarationError(f"{origin}: its body is {media_type!r}, which no MCP argument can carry.")
    schema = _resolved(content[media_type].get("schema", {}), definitions, origin)
    if schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        raise DeclarationError(
            f"{origin}: its body is not an object with named fields ({schema.get('type', 'untyped')}), and MCP "
            "arguments are named; take the body as a Schema."
        )
    return schema, encoding, bool(request_body.get("required", True))


def _resolved(schema: Mapping[str, Any], definitions: Mapping[str, Any], origin: str) -> dict[str, Any]:
    """`schema` with Ninja's component references inlined, titles left out, objects closed."""
    document = {
        **_pointing_to_defs(copy.deepcopy(dict(schema))),
        "$defs": _pointing_to_defs(copy.deepcopy(dict(definitions))),
    }
    resolved = inline_refs(document, origin=origin)
    resolved.pop("$defs", None)
    return closed(untitled(resolved))


def _pointing_to_defs(node: Any) -> Any:
    if isinstance(node, list):
        return [_pointing_to_defs(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        key: ("#/$defs/" + value[len(COMPONENTS) :])
        if key == "$ref" and isinstance(value, str) and value.startswith(COMPONENTS)
        else _pointing_to_defs(value)
        for key, value in node.items()
    }


def _upload(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """The argument for a file field (`UploadedFile`: a binary string in the document), or None."""
    if schema.get("type") == "string" and schema.get("format") == "binary":
        return dict(FILE_SCHEMA)
    items = schema.get("items")
    if schema.get("type") == "array" and isinstance(items, Mapping) and _upload(items) is not None:
        return {"type": "array", "items": dict(FILE_SCHEMA), "description": schema.get("description", "Files.")}
    return None


def _output_schema(
    operation: NinjaOperation, details: Mapping[str, Any], definitions: Mapping[str, Any], origin: str
) -> dict[str, Any] | None:
    if getattr(operation.bound, "stream_format", None) is not None:
        return None  # a stream of items: no one structured result
    described = [
        (status, response)
        for status, response in details.get("responses", {}).items()
        if str(status).startswith("2") and response.get("content")
    ]
    if len(described) != 1:
        return None
    content = described[0][1]["content"]
    media = content.get("application/json") or next(iter(content.values()))
    schema = _resolved(media.get("schema", {}), definitions, origin)
    bound = operation.bound
    if bound.exclude_unset or bound.exclude_defaults or bound.exclude_none:
        optional_everywhere(schema)  # fields may be left out of the answer
    if schema.get("type") == "object" and "properties" in schema:
        return schema
    return object_schema({"result": schema}, ["result"])
