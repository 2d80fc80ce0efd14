from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import pytest
from django.test import override_settings
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from mcp_expose import InvocationContext, Principal
from mcp_expose.core.errors import DeclarationError, InvalidInput
from mcp_expose.declare.json_schemas import bounded, portable_types, thaw
from mcp_expose.declare.schema import SchemaSignature, build_signature, generated_signature


def schema_of(func: Any) -> dict[str, Any]:
    return thaw(build_signature(func, origin="tests.f").input_schema)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    street: str
    city: str = Field(description="City name.")


class Person(BaseModel):
    name: str
    home: Address
    work: Address | None = None


class Node(BaseModel):
    label: str
    children: list[Node] = []


class Summary(TypedDict):
    count: int
    names: list[str]


def test_properties_keep_parameter_order_and_the_object_is_closed() -> None:
    def f(zeta: int, alpha: str, middle: bool = False) -> None: ...

    schema = schema_of(f)
    assert list(schema["properties"]) == ["zeta", "alpha", "middle"]
    assert schema["required"] == ["zeta", "alpha"]
    assert schema["additionalProperties"] is False
    assert schema["type"] == "object"
    assert schema["properties"]["middle"] == {"default": False, "type": "boolean"}


def test_a_function_without_parameters_has_an_empty_closed_schema() -> None:
    def f() -> None: ...

    assert schema_of(f) == {"type": "object", "properties": {}, "additionalProperties": False}


def test_descriptions_come_from_annotated_and_field() -> None:
    def f(
        a: Annotated[int, Field(description="First.", ge=1, le=9)],
        b: str = Field("x", description="Second.", max_length=3),
    ) -> None: ...

    props = schema_of(f)["properties"]
    assert props["a"] == {"description": "First.", "maximum": 9, "minimum": 1, "type": "integer"}
    assert props["b"] == {"default": "x", "description": "Second.", "maxLength": 3, "type": "string"}


def test_literal_and_enum_become_enums() -> None:
    def f(mode: Literal["fast", "slow"], color: Color, only: Literal["one"]) -> None: ...

    props = schema_of(f)["properties"]
    assert props["mode"]["enum"] == ["fast", "slow"]
    assert props["color"]["enum"] == ["red", "blue"]
    assert props["only"]["enum"] == ["one"]
    assert "const" not in props["only"]


def test_nested_models_are_inlined_without_refs() -> None:
    def f(person: Person) -> None: ...

    schema = schema_of(f)
    text = repr(schema)
    assert "$ref" not in text and "$defs" not in text
    person = schema["properties"]["person"]
    assert person["properties"]["home"]["properties"]["city"]["description"] == "City name."
    assert person["properties"]["work"]["anyOf"][0]["properties"]["street"] == {"type": "string", "maxLength": 1000}


def test_recursive_types_are_refused_with_advice() -> None:
    def f(tree: Node) -> None: ...

    with pytest.raises(DeclarationError, match=r"tests\.f: type 'Node' refers to itself.*flat shape"):
        build_signature(f, origin="tests.f")


def test_injected_parameters_are_not_in_the_schema() -> None:
    def f(ctx: InvocationContext, caller: Principal, principal: Any, request: Any, x: int) -> None: ...

    signature = build_signature(f, origin="tests.f")
    assert list(signature.input_schema["properties"]) == ["x"]
    assert dict(signature.injections) == {
        "ctx": "context",
        "caller": "principal",
        "principal": "principal",
        "request": "request",
    }


def test_missing_hint_and_star_args_are_refused() -> None:
    def untyped(x) -> None: ...  # type: ignore[no-untyped-def]

    def star(*args: int) -> None: ...

    def positional(x: int, /) -> None: ...

    with pytest.raises(DeclarationError, match="'x' has no type hint"):
        build_signature(untyped, origin="tests.f")
    with pytest.raises(DeclarationError, match="'args' is variadic positional"):
        build_signature(star, origin="tests.f")
    with pytest.raises(DeclarationError, match="'x' is positional-only"):
        build_signature(positional, origin="tests.f")


def test_output_schema_only_for_models_and_typeddicts() -> None:
    def model() -> Person: ...
    def typed() -> Summary: ...
    def plain() -> dict[str, int]: ...
    def nothing(): ...  # type: ignore[no-untyped-def]

    model_schema = thaw(build_signature(model, origin="t").output_schema)
    assert model_schema["type"] == "object" and "$ref" not in repr(model_schema)
    assert model_schema["properties"]["home"]["properties"]["street"] == {"type": "string"}
    assert thaw(build_signature(typed, origin="t").output_schema) == {
        "type": "object",
        "properties": {"count": {"type": "integer"}, "names": {"items": {"type": "string"}, "type": "array"}},
        "required": ["count", "names"],
    }
    assert build_signature(plain, origin="t").output_schema is None
    assert build_signature(nothing, origin="t").output_schema is None


def test_results_are_validated_against_the_output_schema() -> None:
    def typed() -> Summary: ...

    signature = build_signature(typed, origin="t")
    assert signature.validate_result({"count": 2, "names": ["a", "b"]}) == {"count": 2, "names": ["a", "b"]}
    with pytest.raises(Exception, match="count"):
        signature.validate_result({"names": []})


def test_arguments_are_validated_strictly_with_json_paths() -> None:
    def f(n: int, person: Person, tags: list[str] = []) -> None: ...  # noqa: B006

    signature = build_signature(f, origin="t")
    assert (
        signature.validate_arguments({"n": 1, "person": {"name": "A", "home": {"street": "S", "city": "C"}}})["tags"]
        == []
    )
    with pytest.raises(InvalidInput) as caught:
        signature.validate_arguments(
            {"n": "5", "person": {"name": "A", "home": {"street": 1}}, "tags": ["ok", 2], "extra": True}
        )
    paths = {problem["path"] for problem in caught.value.details}
    assert paths == {"$.n", "$.person.home.street", "$.person.home.city", "$.tags[1]", "$.extra"}
    # The offending values are never echoed back.
    assert "'5'" not in repr(caught.value.details)


def test_an_injected_parameter_name_is_refused_like_any_unknown_key() -> None:
    def f(x: int, principal: Principal) -> None: ...

    signature = build_signature(f, origin="t")
    with pytest.raises(InvalidInput) as injected:
        signature.validate_arguments({"x": 1, "principal": {"user": "root"}})
    with pytest.raises(InvalidInput) as unknown:
        signature.validate_arguments({"x": 1, "whatever": {"user": "root"}})
    assert [p["message"] for p in injected.value.details] == [p["message"] for p in unknown.value.details]
    assert injected.value.details[0]["path"] == "$.principal"


def test_non_finite_numbers_in_arguments_are_invalid_input() -> None:
    def f(x: float) -> None: ...

    with pytest.raises(InvalidInput):
        build_signature(f, origin="t").validate_arguments({"x": float("nan")})


def test_compiled_schemas_are_read_only() -> None:
    def f(x: int) -> None: ...

    signature = build_signature(f, origin="t")
    with pytest.raises(TypeError):
        signature.input_schema["properties"]["y"] = {}  # type: ignore[index]


def test_nested_serializers_are_inlined_and_self_nesting_is_refused() -> None:
    from rest_framework import serializers

    from mcp_expose.declare.adapters.field_schema import serializer_input_schema

    class Address(serializers.Serializer):
        street = serializers.CharField(max_length=50, help_text="Street and number.")
        kind = serializers.ChoiceField(choices=["home", "work"], allow_null=True)

    class Person(serializers.Serializer):
        id = serializers.IntegerField(read_only=True)
        name = serializers.CharField()
        home = Address()
        others = Address(many=True, required=False)
        tags = serializers.ListField(child=serializers.CharField(), default=list)

    schema = serializer_input_schema(Person(), origin="t")
    assert "$ref" not in repr(schema) and "id" not in schema["properties"]
    assert schema["required"] == ["name", "home"]
    assert schema["properties"]["home"]["properties"]["street"] == {
        "type": "string",
        "maxLength": 50,
        "description": "Street and number.",
    }
    assert schema["properties"]["home"]["properties"]["kind"]["enum"] == ["home", "work", None]
    assert schema["properties"]["others"]["items"]["additionalProperties"] is False

    class Node(serializers.Serializer):
        label = serializers.CharField()

    Node._declared_fields["child"] = Node()  # a serializer that contains itself
    with pytest.raises(DeclarationError, match="nest more than"):
        serializer_input_schema(Node(), origin="t")


# Bounded strings and closed objects at every depth ------------------------------------------------------------


class Window(TypedDict):
    start: int


@dataclass
class Point:
    x: int


class Holder(BaseModel):
    window: Window
    point: Point
    tags: list[Address] = []


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    kind: str


def test_unbounded_strings_get_the_cap_and_declared_bounds_stay() -> None:
    def f(
        q: str,
        short: Annotated[str, Field(max_length=3)],
        mode: Literal["fast", "slow"],
        tags: list[str],
        maybe: str | None = None,
        by_name: dict[str, str] | None = None,
    ) -> None: ...

    props = schema_of(f)["properties"]
    assert props["q"] == {"type": "string", "maxLength": 1000}
    assert props["short"]["maxLength"] == 3
    assert "maxLength" not in props["mode"]
    assert props["tags"]["items"] == {"type": "string", "maxLength": 1000}
    assert props["maybe"]["anyOf"][0] == {"type": "string", "maxLength": 1000}
    assert props["by_name"]["anyOf"][0]["additionalProperties"] == {"type": "string", "maxLength": 1000}
    with override_settings(MCP_EXPOSE={"MAX_STRING_LENGTH": 20}):
        assert schema_of(f)["properties"]["q"]["maxLength"] == 20


def test_a_string_over_the_cap_is_invalid_input_naming_path_and_limit() -> None:
    def f(q: str, person: Person | None = None) -> None: ...

    signature = build_signature(f, origin="t")
    with pytest.raises(InvalidInput) as caught:
        signature.validate_arguments(
            {"q": "x" * 60_000, "person": {"name": "y" * 1001, "home": {"street": "S", "city": "C"}}}
        )
    assert caught.value.details == [
        {"path": "$.person.name", "message": "At most 1000 characters."},
        {"path": "$.q", "message": "At most 1000 characters."},
    ]
    assert signature.validate_arguments({"q": "x" * 1000})["q"] == "x" * 1000


def test_a_short_string_over_a_small_bound_is_not_echoed() -> None:
    signature = SchemaSignature(bounded({"type": "object", "properties": {"code": {"type": "string", "maxLength": 4}}}))
    with pytest.raises(InvalidInput) as caught:
        signature.validate_arguments({"code": "secret"})
    assert caught.value.details == [{"path": "$.code", "message": "At most 4 characters."}]


def test_every_nested_object_is_closed_but_mappings_and_open_models_stay_open() -> None:
    def f(holder: Holder, point: Point, loose: Loose, by_name: dict[str, Point], anything: dict[str, Any]) -> None: ...

    props = schema_of(f)["properties"]
    holder = props["holder"]
    assert holder["additionalProperties"] is False
    assert holder["properties"]["window"]["additionalProperties"] is False
    assert holder["properties"]["point"]["additionalProperties"] is False
    assert holder["properties"]["tags"]["items"]["additionalProperties"] is False
    assert props["point"]["additionalProperties"] is False
    assert props["loose"]["additionalProperties"] is True
    assert props["by_name"]["additionalProperties"]["additionalProperties"] is False
    assert props["anything"]["additionalProperties"] is True


def test_unknown_nested_keys_are_refused_with_their_paths() -> None:
    def f(holder: Holder, loose: Loose, by_name: dict[str, Point], anything: dict[str, Any]) -> None: ...

    signature = build_signature(f, origin="t")
    good = {
        "holder": {"window": {"start": 1}, "point": {"x": 2}, "tags": [{"street": "S", "city": "C"}]},
        "loose": {"kind": "k", "more": 1},
        "by_name": {"home": {"x": 3}},
        "anything": {"a": {"b": [1]}},
    }
    values = signature.validate_arguments(good)
    assert values["holder"].window == {"start": 1} and values["loose"].more == 1
    bad = {
        "holder": {
            "window": {"start": 1, "zzz": 2},
            "point": {"x": 2, "zzz": 2},
            "tags": [{"street": "S", "city": "C", "zzz": 2}],
            "zzz": 2,
        },
        "loose": {"kind": "k", "more": 1},
        "by_name": {"home": {"x": 3, "zzz": 2}},
        "anything": {"zzz": 2},
    }
    with pytest.raises(InvalidInput) as caught:
        signature.validate_arguments(bad)
    assert {(p["path"], p["message"].split(";")[0]) for p in caught.value.details} == {
        (path, "Unexpected argument")
        for path in (
            "$.holder.zzz",
            "$.holder.window.zzz",
            "$.holder.point.zzz",
            "$.holder.tags[0].zzz",
            "$.by_name.home.zzz",
        )
    }


def test_drf_mappings_and_json_fields_stay_open_while_nested_serializers_are_closed() -> None:
    from rest_framework import serializers

    from mcp_expose.declare.adapters.field_schema import serializer_input_schema

    class Inner(serializers.Serializer):
        note = serializers.CharField()

    class Outer(serializers.Serializer):
        inner = Inner()
        labels = serializers.DictField(child=serializers.CharField())
        extra = serializers.JSONField()

    signature = generated_signature(serializer_input_schema(Outer(), origin="t"))
    props = signature.input_schema["properties"]
    assert props["inner"]["additionalProperties"] is False
    assert props["labels"]["additionalProperties"] == {"type": "string"}  # a body takes what HTTP takes
    assert "additionalProperties" not in props["extra"]
    signature.validate_arguments(
        {"inner": {"note": "n" * 5000}, "labels": {"any": "x"}, "extra": {"free": {"form": 1}}}
    )
    with pytest.raises(InvalidInput) as caught:
        signature.validate_arguments({"inner": {"note": "n", "zzz": 1}, "labels": {"a": 1}, "extra": 1})
    assert [p["path"] for p in caught.value.details] == ["$.inner.zzz", "$.labels.a"]


def _type_arrays(schema: Any) -> list[Any]:
    """Every `type` in a schema that is an array rather than one type name."""
    if isinstance(schema, list):
        return [found for item in schema for found in _type_arrays(item)]
    if not isinstance(schema, dict):
        return []
    own = [schema["type"]] if isinstance(schema.get("type"), list) else []
    return own + [
        found for key, value in schema.items() if key not in ("enum", "default") for found in _type_arrays(value)
    ]


def _problems(signature: SchemaSignature, arguments: dict[str, Any]) -> list[dict[str, str]] | None:
    try:
        signature.validate_arguments(arguments)
    except InvalidInput as exc:
        return exc.details
    return None


def test_serializer_schemas_name_one_type_per_branch_and_accept_what_type_arrays_did() -> None:
    """DRF fields that take two types (a primary key, a decimal) or null are served as `anyOf` branches of one
    type each, which hosts with single-type schema dialects accept; validation is value for value the same."""
    from rest_framework import serializers

    from mcp_expose.declare.adapters.field_schema import serializer_input_schema

    class Loan(serializers.Serializer):
        book = serializers.PrimaryKeyRelatedField(queryset=[], help_text="The book.")
        returned = serializers.DateField(allow_null=True, required=False)
        note = serializers.CharField(max_length=5, allow_null=True, required=False)
        days = serializers.IntegerField(min_value=1, max_value=30, allow_null=True, required=False)
        fee = serializers.DecimalField(max_digits=5, decimal_places=2, required=False)
        tags = serializers.ListField(child=serializers.CharField(), allow_null=True, required=False)

    generated = serializer_input_schema(Loan(), origin="t")
    assert _type_arrays(generated)  # what the field mappers produce: type arrays, made portable when served
    portable = SchemaSignature(generated, check=False)
    served = thaw(portable.input_schema)
    assert _type_arrays(served) == []
    properties = served["properties"]
    assert properties["book"] == {"anyOf": [{"type": "integer"}, {"type": "string"}], "description": "The book."}
    assert properties["returned"] == {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]}
    assert properties["note"] == {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]}
    assert properties["days"] == {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 30}, {"type": "null"}]}
    assert properties["tags"] == {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]}

    as_written = SchemaSignature(generated, check=False, as_written=True)
    accepted = [
        {"book": 3},
        {"book": "3"},
        {"book": 3, "returned": None, "note": None, "days": None, "tags": None},
        {"book": 3, "returned": "2025-01-31", "note": "short", "days": 30, "fee": "1.50", "tags": ["a"]},
        {"book": 3, "fee": 1.5},
    ]
    refused = [
        {},
        {"book": None},
        {"book": 3.5},
        {"book": True},
        {"book": [3]},
        {"book": 3, "note": "too long"},
        {"book": 3, "days": 0},
        {"book": 3, "days": "5"},
        {"book": 3, "fee": None},
        {"book": 3, "tags": [1, "b", 2]},
        {"book": 3, "returned": 20250131},
    ]
    for arguments in accepted:
        assert _problems(portable, arguments) is None, arguments
    for arguments in refused:
        assert _problems(portable, arguments) is not None, arguments
        assert _problems(portable, arguments) == _problems(as_written, arguments), arguments
    assert _problems(portable, {"book": 3.5}) == [
        {"path": "$.book", "message": "Must be of type ['integer', 'string']."}
    ]
    assert _problems(portable, {"book": 3, "days": 0}) == [
        {"path": "$.days", "message": "0 is less than the minimum of 1"}
    ]


def test_portable_types_keeps_what_is_not_a_type_array() -> None:
    schema = {
        "type": "object",
        "properties": {"type": {"type": ["string", "null"], "default": None}, "enum": {"enum": ["a", None]}},
        "additionalProperties": False,
        "examples": [{"type": ["not", "a", "schema"]}],
    }
    assert portable_types(schema) == {
        "type": "object",
        "properties": {
            "type": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "enum": {"enum": ["a", None]},
        },
        "additionalProperties": False,
        "examples": [{"type": ["not", "a", "schema"]}],
    }
    assert portable_types({"type": ["integer"], "minimum": 0}) == {"type": "integer", "minimum": 0}
    assert portable_types({"type": ["integer", "null"], "anyOf": [{"minimum": 0}, {"type": "null"}]}) == {
        "anyOf": [{"minimum": 0}, {"type": "null"}],
        "allOf": [{"anyOf": [{"type": "integer"}, {"type": "null"}]}],
    }


def test_an_explicit_input_schema_is_served_as_written() -> None:
    from mcp_expose.declare.schema import explicit_signature

    schema = {"type": "object", "properties": {"n": {"type": ["integer", "null"]}}, "additionalProperties": False}
    signature = explicit_signature(lambda n: n, schema, origin="t")
    assert thaw(signature.input_schema) == schema
