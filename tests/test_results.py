from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import uuid
from typing import Any

import pytest
from pydantic import BaseModel

from mcp_expose.calls.results import MAX_DEPTH, ProjectionError, compact_json, structured, to_json_value


class Size(enum.Enum):
    SMALL = "s"


class Level(enum.IntEnum):
    HIGH = 3


@dataclasses.dataclass
class Point:
    x: int
    when: datetime.date


class Model(BaseModel):
    price: decimal.Decimal
    size: Size


def test_plain_values_pass_through() -> None:
    value = {"a": [1, 2.5, "x", None, True], "b": {}}
    assert to_json_value(value) == value


def test_rich_values_get_their_json_form() -> None:
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    value = {
        "decimal": decimal.Decimal("1.10"),
        "date": datetime.date(2024, 1, 2),
        "datetime": datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
        "time": datetime.time(9, 30),
        "delta": datetime.timedelta(days=1, seconds=5),
        "uuid": ident,
        "enum": Size.SMALL,
        "intenum": Level.HIGH,
        "tuple": (1, 2),
        "set": {3, 1, 2},
        "dataclass": Point(1, datetime.date(2020, 5, 6)),
        "model": Model(price=decimal.Decimal("2.50"), size=Size.SMALL),
        7: "int key",
    }
    assert to_json_value(value) == {
        "decimal": "1.10",
        "date": "2024-01-02",
        "datetime": "2024-01-02T03:04:05+00:00",
        "time": "09:30:00",
        "delta": "P1DT00H00M05S",
        "uuid": "12345678-1234-5678-1234-567812345678",
        "enum": "s",
        "intenum": 3,
        "tuple": [1, 2],
        "set": [1, 2, 3],
        "dataclass": {"x": 1, "when": "2020-05-06"},
        "model": {"price": "2.50", "size": "s"},
        "7": "int key",
    }


@pytest.mark.django_db
def test_model_instances_become_their_fields_without_queries(django_assert_num_queries: Any) -> None:
    from project.library.models import Author, Book

    author = Author.objects.create(name="A", born=1900)
    book = Book.objects.create(title="T", author=author, isbn="1", price=decimal.Decimal("3.00"))
    fresh = Book.objects.get(pk=book.pk)
    with django_assert_num_queries(0):
        projected = to_json_value(fresh)
    assert projected["author"] == author.pk and projected["price"] == "3.00" and projected["title"] == "T"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), decimal.Decimal("NaN")])
def test_non_finite_numbers_are_refused(bad: Any) -> None:
    with pytest.raises(ProjectionError, match="finite"):
        to_json_value({"x": [bad]})


def test_cycles_are_refused() -> None:
    value: dict[str, Any] = {}
    value["self"] = [value]
    with pytest.raises(ProjectionError, match="cycle"):
        to_json_value(value)


IDENT = uuid.UUID("12345678-1234-5678-1234-567812345678")


@pytest.mark.parametrize(
    ("colliding", "json_key"),
    [
        ({1: "secret-a", "1": "secret-b"}, "1"),
        ({True: "secret-a", "true": "secret-b"}, "true"),
        ({None: "secret-a", "null": "secret-b"}, "null"),
        ({Size.SMALL: "secret-a", "s": "secret-b"}, "s"),
        ({Level.HIGH: "secret-a", "3": "secret-b"}, "3"),
        ({IDENT: "secret-a", str(IDENT): "secret-b"}, str(IDENT)),
        ({decimal.Decimal("1.50"): "secret-a", "1.50": "secret-b"}, "1.50"),
        ({"outer": [{2: "secret-a", "2": "secret-b"}]}, "2"),
    ],
)
def test_keys_that_become_the_same_string_are_refused(colliding: dict[Any, Any], json_key: str) -> None:
    """Else one value silently replaces the other. The message names the key, never a value (it is logged)."""
    with pytest.raises(ProjectionError, match="same JSON key") as caught:
        to_json_value(colliding)
    assert f'"{json_key}"' in str(caught.value) and "secret" not in str(caught.value)


def test_distinct_keys_of_every_kind_keep_every_value() -> None:
    value = {
        7: "a",
        "2": "b",
        True: "c",
        None: "d",
        Size.SMALL: "e",
        Level.HIGH: "f",
        IDENT: "g",
        decimal.Decimal("1.5"): "h",
    }
    assert to_json_value(value) == {
        "7": "a",
        "2": "b",
        "true": "c",
        "null": "d",
        "s": "e",
        "3": "f",
        str(IDENT): "g",
        "1.5": "h",
    }


def test_shared_but_acyclic_references_are_fine() -> None:
    shared = {"k": 1}
    assert to_json_value([shared, shared]) == [{"k": 1}, {"k": 1}]


def test_nesting_beyond_the_limit_is_refused() -> None:
    ok: Any = "leaf"
    for _ in range(MAX_DEPTH - 1):
        ok = [ok]
    assert to_json_value(ok) is not None
    too_deep: Any = "leaf"
    for _ in range(MAX_DEPTH + 1):
        too_deep = [too_deep]
    with pytest.raises(ProjectionError, match="nests deeper"):
        to_json_value(too_deep)


@pytest.mark.parametrize("bad", [object(), b"bytes", {(1, 2): "tuple key"}])
def test_values_without_json_form_are_refused(bad: Any) -> None:
    with pytest.raises(ProjectionError):
        to_json_value(bad)


def test_structured_wraps_non_objects_and_text_is_compact_and_sorted() -> None:
    assert structured({"b": 1}) == {"b": 1}
    assert structured([1]) == {"result": [1]}
    assert structured(None) == {"result": None}
    assert compact_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'
