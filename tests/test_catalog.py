"""compile_catalog is pure: these tests use unsaved rows and never touch the database."""

from __future__ import annotations

from typing import Any

import pytest

import mcp_expose
from mcp_expose.catalog.compiled import CatalogProvider, compile_catalog
from mcp_expose.declare.exposure_state import ExposureState
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.models import ExposedTool


def declare(registry: CapabilityRegistry, key: str, **options: Any) -> None:
    def func() -> None:
        """Declared doc."""

    func.__name__ = key.rsplit(".", 1)[-1]
    mcp_expose.tool(registry=registry, key=key, **options)(func)


def row(key: str, **fields: Any) -> ExposureState:
    return ExposureState(key=key, **fields)


@pytest.fixture
def three(registry: CapabilityRegistry) -> CapabilityRegistry:
    declare(registry, "app.c", scopes=["read"])
    declare(registry, "app.a", enabled=False)
    declare(registry, "app.b", title="B")
    return registry


def test_declaration_order_and_defaults_without_rows(three: CapabilityRegistry) -> None:
    catalog = compile_catalog(three, {}, "r1")
    assert [entry.name for entry in catalog.tools] == ["app.c", "app.b"]
    assert catalog.revision == "r1"
    assert catalog.get("app.a") is None


def test_rows_switch_tools_on_and_off(three: CapabilityRegistry) -> None:
    catalog = compile_catalog(three, {"app.a": row("app.a"), "app.c": row("app.c", enabled=False)})
    assert [entry.name for entry in catalog.tools] == ["app.a", "app.b"]


def test_row_overrides_and_extra_scopes(three: CapabilityRegistry) -> None:
    catalog = compile_catalog(
        three,
        {
            "app.c": row(
                "app.c",
                wire_name="renamed",
                title="T",
                description="Row text.",
                extra_scopes=frozenset({"write", "admin"}),
            )
        },
    )
    entry = catalog.get("renamed")
    assert entry is not None and catalog.get("app.c") is None
    assert (entry.title, entry.description) == ("T", "Row text.")
    assert entry.scopes == {"read", "write", "admin"}
    untouched = catalog.get("app.b")
    assert untouched is not None and (untouched.title, untouched.description) == ("B", "Declared doc.")


def test_rows_without_a_capability_are_never_served(three: CapabilityRegistry) -> None:
    catalog = compile_catalog(three, {"gone.tool": row("gone.tool"), "gone.two": row("gone.two")})
    assert {entry.key for entry in catalog.tools} == {"app.c", "app.b"}


def test_a_name_clash_from_rows_keeps_the_first_and_reports_the_second(three: CapabilityRegistry) -> None:
    catalog = compile_catalog(three, {"app.b": row("app.b", wire_name="APP.C")})
    assert [entry.name for entry in catalog.tools] == ["app.c"]
    assert catalog.problems == ("app.b: tool name 'APP.C' is already used by app.c; not served.",)


def test_the_catalog_is_immutable(three: CapabilityRegistry) -> None:
    catalog = compile_catalog(three, {})
    with pytest.raises(TypeError):
        catalog.by_name["x"] = catalog.tools[0]  # type: ignore[index]
    with pytest.raises(AttributeError):
        catalog.tools[0].name = "other"  # type: ignore[misc]


@pytest.mark.django_db
def test_provider_recompiles_only_when_the_revision_moves(
    three: CapabilityRegistry, django_assert_num_queries: Any
) -> None:
    from mcp_expose.catalog.revision import bump_revision

    provider = CatalogProvider(three)
    # Five queries per compile, whatever the number of tools: approved upstream tools, rows, their allowed
    # clients, admin prompts, endpoints' toolsets.
    with django_assert_num_queries(5):
        first = provider.get_sync()
    with django_assert_num_queries(0):
        assert provider.get_sync() is first
    ExposedTool.objects.create(key="app.a", enabled=True)
    bump_revision()
    with django_assert_num_queries(5):
        second = provider.get_sync()
    assert second is not first and second.get("app.a") is not None


@pytest.mark.django_db(transaction=True)
def test_saving_a_row_moves_the_revision_after_commit(three: CapabilityRegistry) -> None:
    from django.db import transaction

    from mcp_expose.catalog.revision import current_revision

    before = current_revision()
    with transaction.atomic():
        ExposedTool.objects.create(key="app.b", enabled=False)
        assert current_revision() == before  # nothing is announced before the commit
    assert current_revision() != before


@pytest.mark.django_db
def test_a_lost_revision_stamp_forces_a_recompile(three: CapabilityRegistry) -> None:
    from django.core.cache import cache

    provider = CatalogProvider(three)
    first = provider.get_sync()
    cache.clear()
    assert provider.get_sync() is not first


def test_rows_override_annotation_hints(registry: CapabilityRegistry) -> None:
    declare(registry, "app.x", read_only=True, open_world=False)
    catalog = compile_catalog(
        registry, {"app.x": row("app.x", annotations={"read_only": False, "destructive": True, "open_world": None})}
    )
    assert catalog.get("app.x").annotations.as_dict() == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "openWorldHint": False,
    }


def test_the_approval_page_channel_narrows_from_either_side_and_never_widens(registry: CapabilityRegistry) -> None:
    declare(registry, "app.plain")
    declare(registry, "app.client", requires_confirmation=True)
    declare(registry, "app.page", requires_confirmation="approval_page")
    confirmation = {
        entry.key: (entry.requires_confirmation, entry.confirmation_channel)
        for entry in compile_catalog(registry, {}).tools
    }
    assert confirmation == {
        "app.plain": (False, "client"),
        "app.client": (True, "client"),
        "app.page": (True, "approval_page"),
    }
    rows = {
        "app.plain": row("app.plain", confirmation_channel="approval_page"),  # switches confirmation on too
        "app.client": row("app.client", confirmation_channel="approval_page"),
        "app.page": row("app.page", requires_confirmation=False, confirmation_channel="client"),  # cannot widen
    }
    narrowed = {
        entry.key: (entry.requires_confirmation, entry.confirmation_channel)
        for entry in compile_catalog(registry, rows).tools
    }
    assert set(narrowed.values()) == {(True, "approval_page")}


def test_stamps_are_read_together_and_recreated_when_lost() -> None:
    from django.core.cache import cache

    from mcp_expose.access.credential_cache import CREDENTIALS_KEY
    from mcp_expose.catalog.revision import REVISION_KEY, read_stamps

    first = read_stamps(REVISION_KEY, CREDENTIALS_KEY)
    assert read_stamps(REVISION_KEY, CREDENTIALS_KEY) == first
    cache.delete(CREDENTIALS_KEY)  # evicted: a fresh stamp makes every process forget what it knew
    again = read_stamps(REVISION_KEY, CREDENTIALS_KEY)
    assert again[REVISION_KEY] == first[REVISION_KEY] and again[CREDENTIALS_KEY] != first[CREDENTIALS_KEY]
