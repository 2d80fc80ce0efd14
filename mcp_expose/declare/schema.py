"""Input and output schemas from a function's type hints, and argument validation.

Schemas are closed objects with every `$ref` inlined: many clients cannot follow
references, and a closed object tells the model exactly which keys exist.
Every object this package generates is closed at every depth, and every string
parameter without a declared bound (a body field of a view or model aside, which
takes what it takes over HTTP) gets `MAX_STRING_LENGTH`; arguments are checked
against that schema before anything else sees them, then (for functions) in
pydantic's strict JSON mode, so what the schema says (an integer is an integer,
not the string "5"; no key it does not name) is what is accepted.
Generated schemas name one type per (sub)schema: a value of several types is
an `anyOf` of single-type branches (see `portable_types`).
"""

from __future__ import annotations

import copy
import inspect
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any, Literal, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema
from typing_extensions import is_typeddict

from mcp_expose.core.conf import get_settings
from mcp_expose.core.context import InvocationContext
from mcp_expose.core.errors import DeclarationError, InvalidInput
from mcp_expose.core.principal import Principal

Injection = Literal["context", "principal", "request"]
INJECTED_NAMES: Mapping[str, Injection] = {"principal": "principal", "request": "request"}
MAX_SCHEMA_DEPTH = 64


class _QuietTitles(GenerateJsonSchema):
    """Leave out the titles pydantic derives from names: they cost tokens and say nothing."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


_BUILDING = threading.Lock()


@dataclass(frozen=True)
class ToolSignature:
    """Everything the dispatcher needs to know about a function's parameters and result.

    The arguments model is built again on a tool's first call, from the fields kept here: the schema made
    at declaration is what clients see, and a process keeps no model for the many tools it never runs
    (about 10 KB each).
    """

    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None
    injections: Mapping[str, Injection]
    build_arguments_model: Callable[[], type[BaseModel]]
    output_adapter: TypeAdapter[Any] | None
    schema_check: SchemaCheck | None = None

    @property
    def arguments_model(self) -> type[BaseModel]:
        model = self.__dict__.get("_arguments_model")
        if model is None:
            with _BUILDING:
                model = self.__dict__.get("_arguments_model")
                if model is None:
                    model = self.build_arguments_model()
                    object.__setattr__(self, "_arguments_model", model)
        return model

    def validate_arguments(self, arguments: Mapping[str, Any] | None, *, strict: bool = True) -> dict[str, Any]:
        """Check `arguments` against the input schema; return them as Python values.

        Raises `InvalidInput` whose details list each problem with a JSON path.
        Input values are never echoed back. `strict=False` converts strings (URI
        template variables, prompt arguments) to the declared types.
        """
        if not strict:
            try:
                parsed = self.arguments_model.model_validate(dict(arguments or {}))
            except ValidationError as exc:
                raise InvalidInput("The values do not match what is declared.", details=validation_problems(exc)) from None
            return {name: getattr(parsed, name) for name in type(parsed).model_fields}
        try:
            payload = json.dumps(dict(arguments or {}), allow_nan=False)
        except (TypeError, ValueError):
            raise InvalidInput(
                "The arguments are not plain JSON.",
                details=[{"path": "$", "message": "NaN, Infinity and non-JSON values are not allowed."}],
            ) from None
        if self.schema_check is not None:
            self.schema_check.enforce(arguments or {})
        try:
            parsed = self.arguments_model.model_validate_json(payload, strict=True)
        except ValidationError as exc:
            raise InvalidInput(
                "The arguments do not match the tool's input schema.", details=validation_problems(exc)
            ) from None
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}

    varies_by_caller = False
    explains_refusals = False
    variant = ""  # which of a tool's schemas this is; one schema for everyone: ""

    def for_caller(self, principal: Principal | None) -> ToolSignature:
        """The signature that applies to `principal`: a function's is the same for everyone."""
        return self

    def explain_refusal(self, refusal: InvalidInput, arguments: Mapping[str, Any], context: InvocationContext) -> InvalidInput:
        return refusal

    def validate_result(self, value: Any) -> Any:
        """Validate a result against the output schema and return its JSON form."""
        assert self.output_adapter is not None
        return self.output_adapter.dump_python(self.output_adapter.validate_python(value), mode="json")


class SchemaSignature:
    """A signature given as JSON Schema rather than type hints (views, models), checked with jsonschema.

    The capability behind it validates further (a view's serializer, say); this
    only enforces the closed shape and the types the schema states.
    """

    output_schema: Mapping[str, Any] | None = None
    output_adapter: TypeAdapter[Any] | None = None
    injections: Mapping[str, Injection] = MappingProxyType({})

    def __init__(
        self,
        input_schema: dict[str, Any],
        injections: Mapping[str, Injection] | None = None,
        *,
        check: bool = True,
        as_written: bool = False,
    ) -> None:
        """`check=False` for schemas this package generates (views, models, resources, prompts): they are
        known to be valid, so jsonschema is loaded only when one is first used to validate. `as_written=True`
        serves the schema unchanged (a declaration's own); otherwise type arrays become `anyOf` branches."""
        if check:
            from jsonschema import Draft202012Validator

            Draft202012Validator.check_schema(input_schema)
        if not as_written:
            input_schema = portable_types(input_schema)
        self.input_schema = freeze(input_schema)
        self.schema_check = SchemaCheck(input_schema)
        if injections:
            self.injections = MappingProxyType(dict(injections))

    # A schema that depends on who calls (a view whose serializer reads the request) says so, and
    # `for_caller` gives each caller theirs; see `adapters.caller_schemas`.
    varies_by_caller = False
    explains_refusals = False
    variant = ""  # which of a tool's schemas this is (equal names, equal schemas); one for everyone: ""

    def for_caller(self, principal: Principal | None) -> SchemaSignature:
        return self

    def validate_arguments(self, arguments: Mapping[str, Any] | None, *, strict: bool = True) -> dict[str, Any]:
        values = dict(arguments or {})
        self.schema_check.enforce(values)
        return values

    def explain_refusal(self, refusal: InvalidInput, arguments: Mapping[str, Any], context: InvocationContext) -> InvalidInput:
        """The refusal to report for arguments the schema refused. A view's signature lets the view's own
        validation add what it would have said over HTTP; runs in a worker thread."""
        return refusal

    def validate_result(self, value: Any) -> Any:
        return value


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
        errors for errors in branches.values()
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


class LazySignature:
    """A signature built on first use: views need the URLconf, which is not loaded when apps start."""

    def __init__(self, factory: Callable[[], ToolSignature | SchemaSignature]) -> None:
        self._factory = factory
        self._value: ToolSignature | SchemaSignature | None = None
        self._lock = threading.Lock()

    def resolve(self) -> ToolSignature | SchemaSignature:
        if self._value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._factory()
        return self._value


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


def build_signature(func: Callable[..., Any], *, origin: str) -> ToolSignature:
    """Read `func`'s parameters and return annotation into a `ToolSignature`.

    Raises `DeclarationError` for anything that cannot be expressed as a closed,
    reference-free JSON schema, naming `origin` (the declaration) in the message.
    """
    try:
        hints = get_type_hints(func, include_extras=True)
    except Exception as exc:  # NameError for unresolvable forward references, and the like.
        raise DeclarationError(f"{origin}: cannot resolve its type hints ({exc}).") from exc
    fields: dict[str, Any] = {}
    injections: dict[str, Injection] = {}
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise DeclarationError(
                f"{origin}: parameter {param.name!r} is {param.kind.description}; "
                "tools take named arguments only, so declare each one as a regular parameter."
            )
        annotation = hints.get(param.name, inspect.Parameter.empty)
        injection = _injection_for(param.name, annotation)
        if injection is not None:
            injections[param.name] = injection
            continue
        if annotation is inspect.Parameter.empty:
            raise DeclarationError(
                f"{origin}: parameter {param.name!r} has no type hint. Annotate it so its schema is known "
                "(use typing.Any to accept any JSON value)."
            )
        fields[param.name] = _field_for(annotation, param.default)
    def build_arguments_model() -> type[BaseModel]:
        return create_model(
            f"{func.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )

    model = build_arguments_model()
    try:
        raw = model.model_json_schema(schema_generator=_QuietTitles)
    except Exception as exc:
        raise DeclarationError(f"{origin}: its parameters cannot be described as JSON schema ({exc}).") from exc
    input_schema = freeze(portable_types(bounded(close_object(inline_refs(raw, origin=origin)))))
    output_schema, output_adapter = _output_schema(hints.get("return"), origin=origin)
    return ToolSignature(
        input_schema=input_schema,
        output_schema=freeze(output_schema) if output_schema is not None else None,
        injections=MappingProxyType(injections),
        build_arguments_model=build_arguments_model,
        output_adapter=output_adapter,
        schema_check=SchemaCheck(input_schema),
    )


def generated_signature(input_schema: dict[str, Any]) -> SchemaSignature:
    """The signature of a schema this package generates (views, models, resources): closed at every depth,
    then served. Its generator caps the parameters that are no body field (`capped`)."""
    return SchemaSignature(closed(input_schema), check=False)


def explicit_signature(func: Callable[..., Any], input_schema: Mapping[str, Any], *, origin: str) -> SchemaSignature:
    """A tool whose input schema is given as JSON Schema (2020-12) rather than read from type hints.

    The schema is served exactly as written (`$defs`, `$ref`, composition and conditionals included)
    and arguments are validated against it; the function receives them as keyword arguments, plus
    whatever it asks to have injected.
    """
    from jsonschema.exceptions import SchemaError

    if not isinstance(input_schema, Mapping) or input_schema.get("type") != "object":
        raise DeclarationError(f"{origin}: input_schema must be a JSON Schema object with \"type\": \"object\".")
    if input_schema.get("additionalProperties") is not False:
        # Every argument becomes a keyword argument: an open schema would let callers set parameters it never named.
        raise DeclarationError(f"{origin}: input_schema must be closed: add \"additionalProperties\": false.")
    try:
        hints = get_type_hints(func, include_extras=True)
    except Exception as exc:  # NameError for unresolvable forward references, and the like.
        raise DeclarationError(f"{origin}: cannot resolve its type hints ({exc}).") from exc
    injections = {
        param.name: injection
        for param in inspect.signature(func).parameters.values()
        if (injection := _injection_for(param.name, hints.get(param.name, inspect.Parameter.empty))) is not None
    }
    clashes = sorted(set(input_schema.get("properties", {})) & (set(injections) | set(INJECTED_NAMES)))
    if clashes:
        raise DeclarationError(f"{origin}: input_schema may not name {', '.join(clashes)}: that is injected, not an argument.")
    try:
        return SchemaSignature(copy.deepcopy(dict(input_schema)), injections=injections, as_written=True)
    except SchemaError as exc:
        raise DeclarationError(f"{origin}: input_schema is not a valid JSON Schema ({exc.message}).") from None


def _injection_for(name: str, annotation: Any) -> Injection | None:
    base = get_args(annotation)[0] if get_origin(annotation) is Annotated else annotation
    if isinstance(base, type):
        if issubclass(base, InvocationContext):
            return "context"
        if issubclass(base, Principal):
            return "principal"
    return INJECTED_NAMES.get(name)


def _field_for(annotation: Any, default: Any) -> tuple[Any, Any]:
    if isinstance(default, FieldInfo):
        return (annotation, default)
    return (annotation, ... if default is inspect.Parameter.empty else default)


def _output_schema(annotation: Any, *, origin: str) -> tuple[dict[str, Any] | None, TypeAdapter[Any] | None]:
    """An output schema only for models and TypedDicts: the shapes a client can rely on."""
    if not (isinstance(annotation, type) and (issubclass(annotation, BaseModel) or is_typeddict(annotation))):
        return None, None
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        raw = adapter.json_schema(mode="serialization", schema_generator=_QuietTitles)
    except Exception as exc:
        raise DeclarationError(f"{origin}: its return type cannot be described as JSON schema ({exc}).") from exc
    schema = portable_types(inline_refs(raw, origin=origin))
    schema.pop("title", None)
    return schema, adapter


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


# The keywords that constrain only values of one type: a type array's branch of that type takes them along.
_NUMBER_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
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
