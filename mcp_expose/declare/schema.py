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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any, Literal, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema
from typing_extensions import is_typeddict

from mcp_expose.core.context import InvocationContext
from mcp_expose.core.errors import DeclarationError, InvalidInput
from mcp_expose.core.principal import Principal
from mcp_expose.declare.json_schemas import (
    bounded,
    close_object,
    closed,
    freeze,
    inline_refs,
    portable_types,
)
from mcp_expose.declare.schema_checks import (
    SchemaCheck,
    validation_problems,
)

Injection = Literal["context", "principal", "request"]
INJECTED_NAMES: Mapping[str, Injection] = {"principal": "principal", "request": "request"}


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
                raise InvalidInput(
                    "The values do not match what is declared.", details=validation_problems(exc)
                ) from None
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

    def explain_refusal(
        self, refusal: InvalidInput, arguments: Mapping[str, Any], context: InvocationContext
    ) -> InvalidInput:
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

    def explain_refusal(
        self, refusal: InvalidInput, arguments: Mapping[str, Any], context: InvocationContext
    ) -> InvalidInput:
        """The refusal to report for arguments the schema refused. A view's signature lets the view's own
        validation add what it would have said over HTTP; runs in a worker thread."""
        return refusal

    def validate_result(self, value: Any) -> Any:
        return value


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
        return create_model(f"{func.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields)

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
        raise DeclarationError(f'{origin}: input_schema must be a JSON Schema object with "type": "object".')
    if input_schema.get("additionalProperties") is not False:
        # Every argument becomes a keyword argument: an open schema would let callers set parameters it never named.
        raise DeclarationError(f'{origin}: input_schema must be closed: add "additionalProperties": false.')
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
        raise DeclarationError(
            f"{origin}: input_schema may not name {', '.join(clashes)}: that is injected, not an argument."
        )
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
