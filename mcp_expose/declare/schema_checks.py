"""Checking values against a JSON schema, and saying in the caller's terms what does not fit.

Each problem names its place (a JSON path) and what was expected, never the value that was sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from mcp_expose.core.errors import InvalidInput
from mcp_expose.declare.json_schemas import thaw


class SchemaCheck:
    """An input schema as jsonschema checks it, compiled on first use: the one check every tool's arguments
    pass first, whichever path (SDK or fast path) the call came by."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self._schema = schema
        self._validator: Any = None
        self._lock = threading.Lock()

    @property
    def validator(self) -> Any:
        if self._validator is None:
            with self._lock:
                if self._validator is None:
                    from jsonschema import Draft202012Validator

                    self._validator = Draft202012Validator(thaw(self._schema))
        return self._validator

    def enforce(self, values: Mapping[str, Any]) -> None:
        """Raise `InvalidInput` listing each problem with its JSON path, never echoing a value."""
        errors = self.validator.iter_errors(dict(values))
        problems = sorted((problem for error in errors for problem in _schema_problems(error)), key=lambda p: p["path"])
        if problems:
            raise InvalidInput("The arguments do not match the tool's input schema.", details=problems)


def _schema_problems(error: Any) -> list[dict[str, str]]:
    """One problem per offending key, each with the JSON path of the key itself."""
    location = tuple(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        allowed = set(error.schema.get("properties", {}))
        return [
            {"path": json_path((*location, key)), "message": _schema_message(error)}
            for key in sorted(set(error.instance) - allowed)
        ]
    if error.validator in ("anyOf", "oneOf"):
        branch = _fitting_branch(error)
        if branch:
            return [problem for inner in branch for problem in _schema_problems(inner)]
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else ""
        return [{"path": json_path((*location, missing)) if missing else json_path(location), "message": "Required."}]
    return [{"path": json_path(location), "message": _schema_message(error)}]


def _fitting_branch(error: Any) -> list[Any] | None:
    """The errors of the one alternative the value's own type fits (the model of an `X | None`), if one does:
    they say what is wrong inside it, where "fails the anyOf rule" would not."""
    branches: dict[Any, list[Any]] = {}
    for inner in error.context or ():
        branches.setdefault(inner.relative_schema_path[0], []).append(inner)
    fitting = [
        errors
        for errors in branches.values()
        if not any(inner.validator in ("type", "enum", "const") and not inner.relative_path for inner in errors)
    ]
    return fitting[0] if len(fitting) == 1 else None


def _schema_message(error: Any) -> str:
    """jsonschema's message, without echoing the offending value back (it may be long or secret)."""
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        return "Unexpected argument; allowed here: " + (", ".join(allowed) or "nothing") + "."
    if error.validator == "enum":
        return "Must be one of: " + ", ".join(json.dumps(item) for item in error.validator_value) + "."
    if error.validator == "type":
        return f"Must be of type {error.validator_value}."
    if error.validator == "maxLength":
        return f"At most {error.validator_value} characters."
    if error.validator == "minLength":
        return f"At least {error.validator_value} characters."
    if error.validator == "pattern":  # said by the schema's description where it has one (the value is not echoed)
        description = error.schema.get("description") if isinstance(error.schema, Mapping) else None
        return f"Does not match the pattern {error.validator_value}." + (f" {description}" if description else "")
    if error.validator == "anyOf":
        return _union_message(error)
    return error.message if len(error.message) < 200 else f"Fails the '{error.validator}' rule."


def _union_message(error: Any) -> str:
    """A failed `anyOf` that no branch of the value's own type explains (`_fitting_branch` found none): said
    as a type array's failure was."""
    types = _branch_types(error.validator_value)
    return f"Must be of type {types}." if types is not None else "Matches none of the allowed schemas."


def _branch_types(branches: Any) -> list[str] | None:
    """The one type of each branch of an `anyOf` (as `portable_types` writes a type array), else None."""
    types = [branch.get("type") if isinstance(branch, Mapping) else None for branch in branches]
    return [str(kind) for kind in types] if all(isinstance(kind, str) for kind in types) else None


def json_path(location: tuple[int | str, ...]) -> str:
    """`("items", 0, "name")` as `$.items[0].name`."""
    path = "$"
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def validation_problems(exc: ValidationError) -> list[dict[str, str]]:
    """Pydantic errors as `{"path", "message"}` pairs, without the offending values."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "Unexpected argument; it is not in the tool's input schema."
        problems.append({"path": json_path(tuple(error["loc"])), "message": message})
    return problems
