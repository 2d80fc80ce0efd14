"""A form generated from a tool's input schema, for calling it from the admin as yourself."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_expose.declare.json_schemas import thaw


@dataclass
class FormField:
    name: str
    widget: str  # text, number, checkbox, select, json
    required: bool
    description: str = ""
    options: list[str] = field(default_factory=list)
    value: str = ""
    step: str = "any"

    @property
    def html_id(self) -> str:
        return f"arg-{self.name}"


def _unwrap_optional(prop: Mapping[str, Any]) -> Mapping[str, Any]:
    """`X | None` arrives as anyOf [X, null]: the form asks for X, and leaving it empty means null."""
    options = prop.get("anyOf")
    if isinstance(options, list):
        concrete = [option for option in options if option.get("type") != "null"]
        if len(concrete) == 1:
            return {**concrete[0], **{key: value for key, value in prop.items() if key != "anyOf"}}
    return prop


def _types(schema: Mapping[str, Any]) -> set[str]:
    """The types a value may have: one `type`, a type array, or `anyOf` branches of one type each."""
    kind = schema.get("type")
    if isinstance(kind, list):
        return set(kind)
    if isinstance(kind, str):
        return {kind}
    options = schema.get("anyOf")
    if isinstance(options, list) and all(isinstance(option.get("type"), str) for option in options):
        return {option["type"] for option in options}
    return set()


def form_fields(schema: Mapping[str, Any], values: Mapping[str, str] | None = None) -> list[FormField]:
    schema = thaw(schema)
    required = set(schema.get("required", []))
    values = values or {}
    fields = []
    for name, prop in schema.get("properties", {}).items():
        prop = _unwrap_optional(prop)
        types = _types(prop) - {"null"}
        options = prop.get("enum") or (prop.get("anyOf") and [])
        if prop.get("enum"):
            widget = "select"
            options = [json.dumps(option) if not isinstance(option, str) else option for option in prop["enum"]]
        elif types == {"boolean"}:
            widget = "checkbox"
        elif types in ({"integer"}, {"number"}):
            widget = "number"
        elif types == {"string"} or types == {"number", "string"} or types == {"integer", "string"}:
            widget = "text"
        else:
            widget = "json"
        fields.append(
            FormField(
                name=name,
                widget=widget,
                required=name in required,
                description=str(prop.get("description", "")),
                options=list(options or []),
                value=values.get(name, ""),
                step="1" if types == {"integer"} else "any",
            )
        )
    return fields


def parse_submission(schema: Mapping[str, Any], data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Arguments from the submitted form. Empty optional fields are left out. Returns (arguments, errors)."""
    raw = str(data.get("raw_arguments", "")).strip()
    if raw:
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError as exc:
            return {}, [f"The JSON arguments are not valid JSON: {exc}."]
        if not isinstance(parsed, dict):
            return {}, ["The JSON arguments must be an object."]
        return parsed, []
    arguments: dict[str, Any] = {}
    errors: list[str] = []
    for spec in form_fields(schema):
        key = f"arg_{spec.name}"
        if spec.widget == "checkbox":
            if key in data or spec.required:
                arguments[spec.name] = key in data
            continue
        text = str(data.get(key, "")).strip()
        if not text:
            continue
        prop = _unwrap_optional(thaw(schema)["properties"][spec.name])
        try:
            arguments[spec.name] = _convert(text, spec, prop)
        except ValueError as exc:
            errors.append(f"{spec.name}: {exc}")
    return arguments, errors


def _convert(text: str, spec: FormField, prop: Mapping[str, Any]) -> Any:
    types = _types(prop)
    if spec.widget == "select":
        for option in prop.get("enum", []):
            if (option if isinstance(option, str) else json.dumps(option)) == text:
                return option
        raise ValueError("choose one of the listed values")
    if spec.widget == "json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON ({exc})") from None
    if "integer" in types and text.lstrip("-").isdigit():
        return int(text)
    if "number" in types:
        try:
            return float(text) if "." in text or "e" in text.lower() else int(text)
        except ValueError:
            if "string" not in types:
                raise ValueError("not a number") from None
    if types & {"integer", "number"} and "string" not in types:
        raise ValueError("not a number")
    return text
