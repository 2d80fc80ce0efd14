from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

import mcp_expose
from mcp_expose.checks import declaration_messages
from mcp_expose.core.context import InvocationContext
from mcp_expose.core.errors import DeclarationError, InvalidInput
from mcp_expose.declare.discovery import autodiscover
from mcp_expose.declare.registry import CapabilityRegistry


def declare(registry: CapabilityRegistry, key: str, **options: Any) -> Any:
    def func(x: int = 0) -> int:
        """Doc line."""
        return x

    func.__name__ = key.rsplit(".", 1)[-1]
    return mcp_expose.tool(registry=registry, key=key, **options)(func)


def test_the_decorator_returns_the_function_itself(registry: CapabilityRegistry) -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    assert mcp_expose.tool(registry=registry, key="math.add")(add) is add
    assert add(2, 3) == 5
    capability = registry.get("math.add")
    assert capability is not None
    assert capability.name == "math.add" and capability.description == "Add two numbers."
    assert capability.is_async is False


def test_bare_decorator_uses_app_label_and_function_name(restore_global_registry: CapabilityRegistry) -> None:
    # Declared inside an installed app's module namespace, as autodiscovery does.
    namespace: dict[str, Any] = {"__name__": "project.library.extra", "mcp_expose": mcp_expose}
    exec("@mcp_expose.tool\nasync def shelf_count() -> int:\n    return 1\n", namespace)
    capability = restore_global_registry.get("library.shelf_count")
    assert capability is not None and capability.is_async
    assert namespace["shelf_count"].__name__ == "shelf_count"


def test_declaration_outside_an_app_needs_a_key(registry: CapabilityRegistry) -> None:
    namespace: dict[str, Any] = {"__name__": "somewhere_else", "mcp_expose": mcp_expose, "registry": registry}
    with pytest.raises(DeclarationError, match="not inside an installed app.*key="):
        exec("@mcp_expose.tool(registry=registry)\ndef f() -> int:\n    return 1\n", namespace)


def test_options_are_recorded(registry: CapabilityRegistry) -> None:
    declare(
        registry,
        "shop.refund",
        name="refund",
        title="Refund",
        description="Give money back.",
        scopes=["shop:write"],
        permissions=["shop.change_order"],
        destructive=True,
        idempotent=False,
        enabled=False,
    )
    capability = registry.get("shop.refund")
    assert capability is not None
    assert (capability.name, capability.title, capability.description) == ("refund", "Refund", "Give money back.")
    assert capability.scopes == {"shop:write"} and capability.permissions == {"shop.change_order"}
    assert capability.annotations.as_dict() == {"destructiveHint": True, "idempotentHint": False}
    assert capability.enabled_by_default is False


def test_confirmation_is_declared_through_the_client_or_on_the_approval_page(registry: CapabilityRegistry) -> None:
    declare(registry, "shop.client", requires_confirmation=True)
    declare(registry, "shop.page", requires_confirmation="approval_page")
    declare(registry, "shop.none")
    declared = {
        key: (registry.get(key).requires_confirmation, registry.get(key).confirmation_channel)
        for key in ("shop.client", "shop.page", "shop.none")
    }
    assert declared == {
        "shop.client": (True, "client"),
        "shop.page": (True, "approval_page"),
        "shop.none": (False, "client"),
    }
    with pytest.raises(DeclarationError, match="requires_confirmation= takes True, False or 'approval_page'"):
        declare(registry, "shop.typo", requires_confirmation="approval")


@pytest.mark.django_db
def test_model_and_view_declarations_take_the_approval_page_too(registry: CapabilityRegistry) -> None:
    from project.library import api
    from project.library.models import Author

    mcp_expose.ModelTools(
        Author, actions=["get", "delete"], prefix="t.authors", confirm_deletes="approval_page", registry=registry
    )
    mcp_expose.expose_view(
        api.BookViewSet, actions=["destroy"], requires_confirmation="approval_page", registry=registry
    )
    declared = {
        capability.key: (capability.requires_confirmation, capability.confirmation_channel) for capability in registry
    }
    assert declared == {
        "t.authors.get": (False, "client"),
        "t.authors.delete": (True, "approval_page"),
        "library.books.destroy": (True, "approval_page"),
    }
    with pytest.raises(DeclarationError, match="takes True, False or 'approval_page'"):
        mcp_expose.ModelTools(Author, actions=["get"], confirm_deletes="yes", registry=registry)


def test_a_single_string_for_scopes_is_refused(registry: CapabilityRegistry) -> None:
    with pytest.raises(DeclarationError, match="list of strings"):
        declare(registry, "shop.x", scopes="shop:write")


@pytest.mark.parametrize("argument", ["scopes", "read_scopes", "write_scopes"])
def test_models_refuse_a_single_string_for_scopes(registry: CapabilityRegistry, argument: str) -> None:
    from project.library.models import Author

    given = {argument: "library:read"}
    if argument == "read_scopes":
        given["write_scopes"] = ["library:write"]
    with pytest.raises(DeclarationError, match=f"{argument}= takes a list of strings, not the single string"):
        mcp_expose.ModelTools(Author, actions=["get", "delete"], prefix="t.authors", registry=registry, **given)
    assert list(registry) == []  # nothing half-declared: 'l', 'i', 'b', ... never became scopes


@pytest.mark.parametrize("argument", ["scopes", "permissions"])
def test_views_refuse_a_single_string_for_scopes_and_permissions(registry: CapabilityRegistry, argument: str) -> None:
    from project.library import api

    with pytest.raises(DeclarationError, match=f"{argument}= takes a list of strings, not the single string"):
        mcp_expose.expose_view(api.BookViewSet, actions=["list"], registry=registry, **{argument: "library.x"})
    assert list(registry) == []


@pytest.mark.parametrize(
    ("name", "fragment"),
    [("", "non-empty"), ("a" * 65, "65 characters"), ("has space", "' '"), ("slash/y", "'/'"), ("ünï", "'ïü'")],
)
def test_invalid_names_are_reported(registry: CapabilityRegistry, name: str, fragment: str) -> None:
    declare(registry, "app.tool", name=name or None)
    if name == "":
        # An empty name falls back to the identity, which is valid.
        assert registry.problems() == []
        return
    problems = registry.problems()
    assert [p[0] for p in problems] == ["mcp_expose.E002"]
    assert fragment in problems[0][1] and "tests.test_registry" in problems[0][1]


def test_names_of_64_characters_are_fine(registry: CapabilityRegistry) -> None:
    declare(registry, "app.tool", name="a" * 64)
    assert registry.problems() == []


def test_collisions_name_both_declarations_even_when_only_case_differs(registry: CapabilityRegistry) -> None:
    declare(registry, "app.one", name="Lookup")
    declare(registry, "app.two", name="lookup")
    declare(registry, "app.three", name="other")
    declare(registry, "app.three", name="other-again")
    problems = registry.problems()
    assert [p[0] for p in problems] == ["mcp_expose.E003", "mcp_expose.E003"]
    assert "'lookup'" in problems[0][1] and "'Lookup'" in problems[0][1] and "differ only in case" in problems[0][1]
    assert "'app.three'" in problems[1][1]


def test_a_duplicate_key_is_told_how_its_kind_of_declaration_takes_another(registry: CapabilityRegistry) -> None:
    from project.library.models import Author

    declare(registry, "app.one")
    declare(registry, "app.one")
    mcp_expose.ModelTools(Author, actions=["get"], registry=registry)
    mcp_expose.ModelTools(Author, actions=["get"], registry=registry)
    hints = [hint for check_id, _, hint in registry.problems() if check_id == "mcp_expose.E003"]
    assert hints[0] == "Give one of them another key: rename the function, or pass key='app_label.name' to @tool."
    assert hints[1] == "Give one of them another key: pass prefix= to ModelTools (its keys are prefix.action)."


def test_the_system_check_reports_the_same_problems(registry: CapabilityRegistry) -> None:
    declare(registry, "app.one", name="dup")
    declare(registry, "app.two", name="DUP")
    declare(registry, "app.three", scopes=["bad scope"], permissions=["nodot"])
    messages = declaration_messages(registry)
    assert sorted(m.id for m in messages) == ["mcp_expose.E003", "mcp_expose.E004", "mcp_expose.E010"]
    assert all(m.hint for m in messages)


def test_startup_refuses_a_registry_with_problems(restore_global_registry: CapabilityRegistry) -> None:
    from django.apps import apps

    declare(restore_global_registry, "library.search_books_again", name="library.SEARCH_BOOKS")
    with pytest.raises(ImproperlyConfigured, match=r"mcp_expose\.E003.*library\.search_books"):
        apps.get_app_config("mcp_expose").ready()


def test_autodiscovery_imports_modules_and_rolls_back_broken_ones(
    restore_global_registry: CapabilityRegistry,
) -> None:
    with override_settings(INSTALLED_APPS=["tests.apps.quiet", "tests.apps.declaring"]):
        autodiscover("mcp", restore_global_registry)
    assert "declaring.ping" in restore_global_registry
    with override_settings(INSTALLED_APPS=["tests.apps.broken"]):
        with pytest.raises(ModuleNotFoundError, match="this_module_does_not_exist"):
            autodiscover("mcp", restore_global_registry)
    # What the broken module registered before failing was rolled back.
    assert "broken.first" not in restore_global_registry


def test_an_explicit_input_schema_is_served_as_written_and_enforced(registry: CapabilityRegistry) -> None:
    schema = {
        "type": "object",
        "$defs": {"city": {"type": "string", "minLength": 2}},
        "properties": {"city": {"$ref": "#/$defs/city"}, "nights": {"type": "integer"}},
        "if": {"required": ["nights"]},
        "then": {"properties": {"nights": {"minimum": 1}}},
        "additionalProperties": False,
    }

    def book(**arguments: Any) -> dict[str, Any]:
        return arguments

    mcp_expose.tool(registry=registry, key="t.book", input_schema=schema)(book)
    signature = registry.get("t.book").signature
    assert dict(signature.input_schema)["$defs"] == {"city": {"type": "string", "minLength": 2}}
    assert signature.validate_arguments({"city": "Oslo", "nights": 2}) == {"city": "Oslo", "nights": 2}
    with pytest.raises(InvalidInput) as refused:
        signature.validate_arguments({"city": "O", "nights": 0, "as_user": "admin"})
    assert {problem["path"] for problem in refused.value.details} == {"$.city", "$.nights", "$.as_user"}


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "object", "properties": {"amount": {"type": "number"}}}, "must be closed"),
        (
            {"type": "object", "properties": {"context": {"type": "string"}}, "additionalProperties": False},
            "may not name context",
        ),
        ({"type": "array"}, "type.*object"),
        (
            {"type": "object", "properties": {"x": {"type": 5}}, "additionalProperties": False},
            "not a valid JSON Schema",
        ),
    ],
)
def test_an_explicit_input_schema_must_be_closed_and_valid(
    registry: CapabilityRegistry, schema: dict[str, Any], message: str
) -> None:
    def transfer(context: InvocationContext, **arguments: Any) -> None:
        return None

    with pytest.raises(DeclarationError, match=message):
        mcp_expose.tool(registry=registry, key="t.transfer", input_schema=schema)(transfer)
